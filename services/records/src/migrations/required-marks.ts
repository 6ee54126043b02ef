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
 * marked apart.
 */
export class RequiredMarks extends Migration {
  override up() {
    this.addSql(`
      alter table pending_type_change add column required boolean not null default false;

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
            and expires_at > now() and id <> all (p_pending_checked)
        ) then
          return 'pending';
        end if;
        return 'ok';
      end
      $gate$;
    `);
  }
}
