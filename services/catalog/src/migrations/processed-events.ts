import { Migration } from "@mikro-orm/migrations";
import { PROCESSED_EVENT_TABLE_SQL } from "@rowbase/kit";

/**
 * `processed_event` remembers, per consumer (`catalog_org_deleted`), the events already applied:
 * the id is stored in the transaction that applies the event, so a redelivery applies nothing.
 */
export class ProcessedEvents extends Migration {
  override up() {
    this.addSql(PROCESSED_EVENT_TABLE_SQL);
  }
}
