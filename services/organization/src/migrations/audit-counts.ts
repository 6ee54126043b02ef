import { Migration } from "@mikro-orm/migrations";

/** The scopes an event counts in: one row of (scope, scope_id) each, `e` being the event. */
const SCOPES_OF_EVENT = `lateral (values ('organization', e.organization_id),
  ('database', e.database_id), ('table', e.table_id)) as v(scope, scope_id)`;

/**
 * What an audit list reads, kept so that a page costs about the same whatever the size of the
 * log.
 *
 * `audit_count`: how many events each scope (the organization, a database, a table) holds per
 * UTC hour and action. A list's exact `total` sums the hours its time range covers whole and
 * counts only the events of the partial hours at its ends (`AuditLog.list`): counting a
 * million events took 200-300 ms of PostgreSQL on every page. Statement triggers on
 * `audit_event` keep it in the writing transaction, whoever writes (the consumer, the expiry,
 * a test). Writers of an organization's same hour meet on its rows: each statement upserts
 * them in key order, so they queue until the other commits and never deadlock. Rows of hours
 * past the retention are deleted by the expiry (`AuditLog.expire`); a list never sums them.
 * The table's lock keeps writes out while the migration counts what is there.
 *
 * The scope indexes now end in `event_id` and include what a list filters on, so that a
 * page's events are found, and an offset skipped, in the index alone, and only the page's
 * rows are read. They replace the indexes on `(scope, at desc)`, dropped last: a drop locks
 * the table against reads until the migration commits, building an index only against writes.
 */
export class AuditCounts extends Migration {
  override up() {
    this.addSql(`
      create table audit_count (
        scope text not null check (scope in ('organization', 'database', 'table')),
        scope_id bigint not null,
        organization_id bigint not null,
        hour timestamptz not null,
        action text not null,
        n bigint not null,
        primary key (scope, scope_id, organization_id, hour, action)
      );

      lock table audit_event in share row exclusive mode;
      insert into audit_count (scope, scope_id, organization_id, hour, action, n)
      select v.scope, v.scope_id, e.organization_id, date_trunc('hour', e.at, 'UTC'), e.action,
        count(*)
      from audit_event e, ${SCOPES_OF_EVENT}
      where v.scope_id is not null
      group by 1, 2, 3, 4, 5;

      create function audit_count_change() returns trigger language plpgsql
      set search_path from current
      as $count$
      declare
        changed text := case tg_op
          when 'INSERT' then 'select *, 1 as sign from new_events'
          when 'DELETE' then 'select *, -1 as sign from old_events'
          else 'select *, 1 as sign from new_events union all select *, -1 from old_events'
        end;
      begin
        execute format($upsert$
          insert into audit_count as c (scope, scope_id, organization_id, hour, action, n)
          select v.scope, v.scope_id, e.organization_id, date_trunc('hour', e.at, 'UTC'),
            e.action, sum(e.sign)
          from (%s) e, ${SCOPES_OF_EVENT}
          where v.scope_id is not null
          group by 1, 2, 3, 4, 5
          having sum(e.sign) <> 0
          order by 1, 2, 3, 4, 5
          on conflict (scope, scope_id, organization_id, hour, action)
          do update set n = c.n + excluded.n
        $upsert$, changed);
        return null;
      end
      $count$;

      create trigger audit_count_insert after insert on audit_event
        referencing new table as new_events
        for each statement execute function audit_count_change();
      create trigger audit_count_delete after delete on audit_event
        referencing old table as old_events
        for each statement execute function audit_count_change();
      create trigger audit_count_update after update on audit_event
        referencing old table as old_events new table as new_events
        for each statement execute function audit_count_change();

      create index audit_event_page_by_organization
        on audit_event (organization_id, at desc, event_id desc) include (action);
      create index audit_event_page_by_database
        on audit_event (database_id, at desc, event_id desc) include (organization_id, action)
        where database_id is not null;
      create index audit_event_page_by_table
        on audit_event (table_id, at desc, event_id desc) include (organization_id, action)
        where table_id is not null;
      drop index audit_event_by_organization;
      drop index audit_event_by_database;
      drop index audit_event_by_table;
    `);
  }
}
