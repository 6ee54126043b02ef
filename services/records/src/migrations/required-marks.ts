import { Migration } from "@mikro-orm/migrations";

/**
 * A `required` mark in `pending_type_change`: a field being made required (CheckFieldTypeChange
 * found no record without a value), from that check until it expires or the field is made
 * optional again (the check of that change removes it). Catalog commits the change after the
 * check, so a write checked against the field as optional can land in between and leave it
 * empty. A write leaves a field empty by not naming it as well as by clearing it, and the gate
 * knows only the fields a write sets, so a live required mark holds every write of the table
 * (`pending`): the write then checks its values with the field required. Applied changes
 * (FieldTypeChanged, ChoicesRenamed) never clear a required mark; a type change made with it is
 * marked apart. `write_gate` (sql/write_gate.sql) holds the writes.
 */
export class RequiredMarks extends Migration {
  override up() {
    this.addSql(`
      alter table pending_type_change add column required boolean not null default false;
    `);
  }
}
