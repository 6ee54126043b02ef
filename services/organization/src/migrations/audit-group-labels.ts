import { Migration } from "@mikro-orm/migrations";

/**
 * `labels`: the labels a group's changes share (AuditEventBatch.labels_json), a JSON object from
 * a change's key to its label, given when the group's events are listed to the changes that
 * have none of their own. Null for one event, and for a group whose changes carry their labels.
 * Adding the column rewrites nothing.
 */
export class AuditGroupLabels extends Migration {
  override up() {
    this.addSql("alter table audit_event add column labels jsonb");
  }
}
