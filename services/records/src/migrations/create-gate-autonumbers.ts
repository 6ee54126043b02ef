import { Migration } from "@mikro-orm/migrations";

/**
 * `create_gate` also answers `stale` when the table has an autonumber field the create does not
 * number: its schema was read before the field was added. Records that such a create inserted
 * after the field's existing records were numbered (`reserveAutonumbers`) would never get a
 * number; the caller reads the schema again from catalog and retries. `p_autonumber_fields` are
 * the fields the create numbers (null: do not look). A field's counter row
 * (`autonumber_counter`) exists from the moment its numbering starts, under the table's exclusive
 * lock, which every create waits for. A deleted field's counter is kept, marked `deleted`, so
 * that a create whose schema still has the field cannot start it again (`takeAutonumbers`
 * refuses it, and the create reads the schema again) and leave every later create `stale`.
 * The four-argument form stays for replicas of the previous version during a rollout.
 */
export class CreateGateAutonumbers extends Migration {
  override up() {
    this.addSql(`
      alter table autonumber_counter add column deleted boolean not null default false;

      create function create_gate(
        p_table_id bigint, p_organization_id bigint, p_count bigint, p_limit bigint,
        p_autonumber_fields bigint[]
      ) returns text language plpgsql volatile
      set search_path from current
      as $gate$
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

      create or replace function create_gate(
        p_table_id bigint, p_organization_id bigint, p_count bigint, p_limit bigint
      ) returns text language sql volatile
      set search_path from current
      as $gate$ select create_gate(p_table_id, p_organization_id, p_count, p_limit, null) $gate$;
    `);
  }
}
