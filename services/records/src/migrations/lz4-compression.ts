import { Migration } from "@mikro-orm/migrations";
import { lz4CompressionSql } from "@rowbase/kit";

/**
 * A batch write's change log row (its changes as one JSON array) and its outbox rows (the
 * compact audit messages) are compressed with lz4 rather than pglz (kit `lz4CompressionSql`).
 */
export class Lz4Compression extends Migration {
  override up() {
    this.addSql(lz4CompressionSql(["record_change_write.changes", "outbox.payload"]));
  }
}
