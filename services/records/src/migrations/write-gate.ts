import { Migration } from "@mikro-orm/migrations";

/**
 * What a write must know of the table's fields beyond the schema it was checked against, which
 * can be older than catalog's last change; `write_gate` (sql/write_gate.sql) looks it up.
 *
 * `deleted_field` marks a field whose values records dropped (FieldDeleted, under the table's
 * exclusive lock): a write that still holds a value for it would store data no field shows.
 *
 * `pending_type_change` is a type (or options) change CheckFieldTypeChange found every stored
 * value fit for, from that check until records converts the values (FieldTypeChanged; for a
 * select's new choices, ChoicesRenamed) or it expires (the change was never committed). Catalog
 * commits the change after the check, so a write checked against the old type can land in
 * between; its value must convert as well, or the conversion would clear a value the client was
 * told was stored. The check inserts the row under the table's exclusive lock before it reads
 * the values: every write holding the table's shared lock then has committed (and the check
 * reads its value), and every later one sees the row.
 */
export class WriteGate extends Migration {
  override up() {
    this.addSql(`
      create table deleted_field (
        table_id bigint not null,
        field_id bigint not null,
        primary key (table_id, field_id)
      );

      create table pending_type_change (
        id bigint generated always as identity primary key,
        table_id bigint not null,
        field_id bigint not null,
        to_type text not null,
        to_options jsonb not null,
        expires_at timestamptz not null
      );
      create index pending_type_change_table on pending_type_change (table_id);
    `);
  }
}
