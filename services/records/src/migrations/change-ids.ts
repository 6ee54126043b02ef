import { Migration } from "@mikro-orm/migrations";

/**
 * `change_id` names the attempt at a change whose check left the mark: catalog gives it to
 * CheckFieldTypeChange, to ReleaseFieldTypeChange and to the change's event, so that each ends
 * that attempt's marks only. An equal change checked later (its event late, its mark expired
 * and swept) keeps its own, and catalog can release a check whose answer it never got. Null
 * for marks of catalogs older than it.
 *
 * `lifted_by` is the change id of a change making the field optional again, on the field's
 * required marks (migrations/required-marks.ts): from its check they hold no write, and
 * releasing the change, which catalog did not commit, makes them hold writes again. Committed,
 * the change leaves them lifted until they expire.
 *
 * `write_gate` (sql/write_gate.sql) passes over lifted marks.
 */
export class ChangeIds extends Migration {
  override up() {
    this.addSql(`
      alter table pending_type_change add column change_id text, add column lifted_by text;
    `);
  }
}
