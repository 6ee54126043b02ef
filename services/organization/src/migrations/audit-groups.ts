import { Migration } from "@mikro-orm/migrations";

/** The scopes an event counts in: one row of (scope, scope_id) each, `e` being the event. */
const SCOPES_OF_EVENT = `lateral (values ('organization', e.organization_id),
  ('database', e.database_id), ('table', e.table_id)) as v(scope, scope_id)`;

/**
 * A batch write's audit events as one row of `audit_event` (AuditLog): inserting a row and four
 * index entries per record was what a batch import of records cost the audit log, and what
 * held batch creates back.
 *
 * - `events`: how many events the row holds, 1 unless it is a group.
 * - `target_ids`: a group's targets in order (null for one event); its `changes` is then a JSON
 *   array of the events' changes arrays, and `target_id` its first target. A group's events
 *   share the rest of the row; each one's id is made from the row's and its place.
 *
 * `audit_count` adds each row's `events` instead of 1, and the page indexes include it, so that
 * a list skips whole groups by their counts in the index alone. The new indexes are built
 * before the old ones are dropped (a drop locks the table against reads until the commit).
 * Adding the columns rewrites nothing (a constant default, and no default).
 */
export class AuditGroups extends Migration {
  override up() {
    this.addSql(`
      alter table audit_event add column events integer not null default 1,
        add column target_ids bigint[];

      create or replace function audit_count_change() returns trigger language plpgsql
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
            e.action, sum(e.sign * e.events)
          from (%s) e, ${SCOPES_OF_EVENT}
          where v.scope_id is not null
          group by 1, 2, 3, 4, 5
          having sum(e.sign * e.events) <> 0
          order by 1, 2, 3, 4, 5
          on conflict (scope, scope_id, organization_id, hour, action)
          do update set n = c.n + excluded.n
        $upsert$, changed);
        return null;
      end
      $count$;

      create index audit_event_groups_by_organization
        on audit_event (organization_id, at desc, event_id desc) include (action, events);
      create index audit_event_groups_by_database
        on audit_event (database_id, at desc, event_id desc)
        include (organization_id, action, events)
        where database_id is not null;
      create index audit_event_groups_by_table
        on audit_event (table_id, at desc, event_id desc)
        include (organization_id, action, events)
        where table_id is not null;
      drop index audit_event_page_by_organization;
      drop index audit_event_page_by_database;
      drop index audit_event_page_by_table;
    `);
  }
}
