import { Migration } from "@mikro-orm/migrations";
import { PROCESSED_EVENT_TABLE_SQL } from "@rowbase/kit";

/**
 * `processed_event` remembers, per consumer (`files_catalog`, `files_org`, `files_records`), the
 * events already applied: the id is stored in the transaction that applies the event, so a
 * redelivery or a replay applies nothing.
 */
export class ProcessedEvents extends Migration {
  override up() {
    this.addSql(PROCESSED_EVENT_TABLE_SQL);
  }
}
