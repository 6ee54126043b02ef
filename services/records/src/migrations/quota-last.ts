import { Migration } from "@mikro-orm/migrations";

/**
 * A one-statement create takes its organization's `organization_usage` row last. `create_gate`
 * upserted the row before the insert, and the row stays locked to the commit: every create of
 * the organization waited for the whole insert of the one before it, so a batch of 1000 held
 * all of the organization's other writers for its tens of milliseconds, and one organization's
 * imports could never use more than one of PostgreSQL's cores (`test/bench/ROUNDS.md`,
 * twenty-third round).
 *
 * `create_checks` is `create_gate` without the quota's upsert: the locks, `gone`, `stale`,
 * `pending`, and `over_limit` for a create larger than the limit itself. `take_records` is the
 * quota: it counts records against the limit on the usage row, or answers false.
 * `reserve_records` takes them after the insert, in the same statement, and raises SQLSTATE
 * RB001 when they do not fit, so that the statement writes nothing.
 * `create_gate` stays for creates of several statements (autonumbers, pending type changes),
 * which call it last already, and for replicas of the previous version during a rollout; it is
 * now `create_checks` and then the quota, so that the checks are written once.
 */
export class QuotaLast extends Migration {
  override up() {
    this.addSql(`
      create function create_checks(
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
        return 'ok';
      end
      $gate$;

      create function take_records(
        p_organization_id bigint, p_count bigint, p_limit bigint
      ) returns boolean language plpgsql volatile
      set search_path from current
      as $take$
      begin
        insert into organization_usage as u (organization_id, records)
        values (p_organization_id, p_count)
        on conflict (organization_id) do update set records = u.records + excluded.records
          where u.records + excluded.records <= p_limit;
        return found;
      end
      $take$;

      create function reserve_records(
        p_organization_id bigint, p_count bigint, p_limit bigint
      ) returns text language plpgsql volatile
      set search_path from current
      as $reserve$
      begin
        if not take_records(p_organization_id, p_count, p_limit) then
          raise exception 'the organization''s record limit is reached'
            using errcode = 'RB001';
        end if;
        return 'ok';
      end
      $reserve$;

      create or replace function create_gate(
        p_table_id bigint, p_organization_id bigint, p_count bigint, p_limit bigint,
        p_autonumber_fields bigint[], p_fields bigint[], p_pending_checked bigint[]
      ) returns text language plpgsql volatile
      set search_path from current
      as $gate$
      declare
        v_checked text := create_checks(p_table_id, p_organization_id, p_count, p_limit,
          p_autonumber_fields, p_fields, p_pending_checked);
      begin
        if v_checked <> 'ok' then
          return v_checked;
        end if;
        return case when take_records(p_organization_id, p_count, p_limit)
          then 'ok' else 'over_limit' end;
      end
      $gate$;
    `);
  }
}
