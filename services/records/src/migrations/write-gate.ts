import { Migration } from "@mikro-orm/migrations";

/**
 * What a write must know of the table's fields beyond the schema it was checked against, which
 * can be older than catalog's last change (the cached schema, or one read just before it).
 *
 * `deleted_field` marks a field whose values records dropped (FieldDeleted, under the table's
 * exclusive lock): a write that still holds a value for it would store data no field shows.
 *
 * `pending_type_change` is a type (or options) change CheckFieldTypeChange found every stored
 * value fit for, from that check until records converts the values (FieldTypeChanged; for a
 * select's new choices, ChoicesRenamed) or it expires (the change was never committed). Catalog commits the change after the check, so a
 * write checked against the old type can land in between; its value must convert as well, or
 * the conversion would clear a value the client was told was stored. The check inserts the row
 * under the table's exclusive lock before it reads the values: every write holding the table's
 * shared lock then has committed (and the check reads its value), and every later one sees the
 * row.
 *
 * `write_gate` takes the table's shared lock for the rest of the write's transaction and then
 * (a VOLATILE function's queries each read a fresh snapshot, so after the lock) answers `stale`
 * when one of `p_fields`, the fields the write holds values for, is deleted, `pending` when one
 * of them has a live pending change not in `p_pending_checked` (the ones the write has checked
 * its values against), else `ok`. An update calls it in the statement that locks its records;
 * a create through `create_gate`, whose seven-argument form calls it after its own checks. The
 * five-argument form stays for replicas of the previous version during a rollout.
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

      create function write_gate(
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
          where table_id = p_table_id and field_id = any (p_fields) and expires_at > now()
            and id <> all (p_pending_checked)
        ) then
          return 'pending';
        end if;
        return 'ok';
      end
      $gate$;

      create function create_gate(
        p_table_id bigint, p_organization_id bigint, p_count bigint, p_limit bigint,
        p_autonumber_fields bigint[], p_fields bigint[], p_pending_checked bigint[]
      ) returns text language plpgsql volatile
      set search_path from current
      as $gate$
      declare
        v_written text;
      begin
        perform pg_advisory_xact_lock_shared(
                  hashtextextended('records.organization:' || p_organization_id, 0)),
                pg_advisory_xact_lock_shared(hashtextextended('records.table:' || p_table_id, 0));
        if exists (select 1 from deleted_table where table_id = p_table_id)
           or exists (select 1 from deleted_organization where organization_id = p_organization_id)
        then
          return 'gone';
        end if;
        if p_autonumber_fields is not null and exists (
          select 1 from autonumber_counter
          where table_id = p_table_id and not deleted and field_id <> all (p_autonumber_fields)
        ) then
          return 'stale';
        end if;
        v_written := write_gate(p_table_id, p_fields, p_pending_checked);
        if v_written <> 'ok' then
          return v_written;
        end if;
        if p_count > p_limit then
          return 'over_limit';
        end if;
        insert into organization_usage as u (organization_id, records)
        values (p_organization_id, p_count)
        on conflict (organization_id) do update set records = u.records + excluded.records
          where u.records + excluded.records <= p_limit;
        return case when found then 'ok' else 'over_limit' end;
      end
      $gate$;
    `);
  }
}
