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
 * `write_gate` passes over lifted marks.
 */
export class ChangeIds extends Migration {
  override up() {
    this.addSql(`
      alter table pending_type_change add column change_id text, add column lifted_by text;

      create or replace function write_gate(
        p_table_id bigint, p_fields bigint[], p_pending_checked bigint[]
      ) returns text language plpgsql volatile
      set search_path from current
      as $gate$
      begin
        perform pg_advisory_xact_lock_shared(hashtextextended('records.table:' || p_table_id, 0));
        if exists (
          select 1 from deleted_field where table_id = p_table_id and field_id = any (p_fields)
        ) then
          return 'stale';
        end if;
        if exists (
          select 1 from pending_type_change
          where table_id = p_table_id and (field_id = any (p_fields) or required)
            and lifted_by is null and expires_at > now() and id <> all (p_pending_checked)
        ) then
          return 'pending';
        end if;
        return 'ok';
      end
      $gate$;
    `);
  }
}
