import { Migration } from "@mikro-orm/migrations";
import { lz4CompressionSql } from "@rowbase/kit";

/**
 * An audit group's `changes` (a batch write's changes, one JSON array) is compressed with lz4
 * rather than pglz (kit `lz4CompressionSql`).
 */
export class Lz4Compression extends Migration {
  override up() {
    this.addSql(lz4CompressionSql(["audit_event.changes"]));
  }
}
