import { Migration } from "@mikro-orm/migrations";

/**
 * `pending_type_change_write` notes the records a write changed while a type change of a field
 * it set was pending, one row per pending mark the write's values were checked against. The
 * conversion goes a chunk per transaction and takes the table's exclusive lock only for the
 * last, so such a write can land in a chunk already converted, leaving a value of the old type
 * (a text "42" in what is now a number field). The last transaction converts the noted records
 * again (`TypeChanges.applyNoted`). A write notes its records in its own transaction, under the
 * table's shared lock; marks are deleted only under the table's exclusive lock, so a note never
 * names a mark that is gone, and its notes go with it.
 */
export class PendingWrites extends Migration {
  override up() {
    this.addSql(`
      create table pending_type_change_write (
        mark_id bigint not null references pending_type_change (id) on delete cascade,
        row_id bigint not null,
        primary key (mark_id, row_id)
      );
    `);
  }
}
