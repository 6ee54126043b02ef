import { Migration } from "@mikro-orm/migrations";
import { PROCESSED_EVENT_TABLE_SQL } from "@rowbase/kit";

/**
 * The audit store and the usage aggregates, both fed by events (AUDIT and USAGE streams), and
 * the ids of the events already applied (`consumeOnce`).
 *
 * `audit_event` is partitioned by month of `at`, so that the 90-day expiry drops whole
 * partitions (no row-by-row delete, no bloat) and deletes rows only from the one partition
 * that straddles the cutoff. Partitions are created ahead (this month and the next) by the
 * service's maintenance job, so this migration only creates the parent and a default partition
 * that catches whatever has no monthly partition (a late event of a month never created): the
 * expiry deletes from it by time like from the straddling partition. The primary key must
 * contain the partition key; event ids are deduplicated by `processed_event` anyway. Events
 * keep the organization_id they carried: no foreign key, since the log of a deleted
 * organization stays until it expires.
 *
 * `usage_daily` (per organization and UTC day) and `usage_daily_token` (per API token too) are
 * counters that usage events add to; they go with their organization.
 */
export class AuditLogAndUsage extends Migration {
  override up() {
    this.addSql(`
      create table audit_event (
        event_id text not null,
        at timestamptz not null,
        organization_id bigint not null,
        database_id bigint,
        table_id bigint,
        actor_type text not null check (actor_type in ('user', 'api_token', 'system')),
        actor_id bigint not null,
        action text not null,
        target_type text not null,
        target_id bigint not null,
        target_field_id bigint,
        changes jsonb not null default '[]',
        request_id text,
        primary key (event_id, at)
      ) partition by range (at);
      create table audit_event_default partition of audit_event default;
      create index audit_event_by_organization on audit_event (organization_id, at desc);
      create index audit_event_by_database on audit_event (database_id, at desc)
        where database_id is not null;
      create index audit_event_by_table on audit_event (table_id, at desc)
        where table_id is not null;

      create table usage_daily (
        organization_id bigint not null references organizations (id) on delete cascade,
        day date not null,
        api_calls bigint not null default 0,
        transfer_bytes bigint not null default 0,
        primary key (organization_id, day)
      );

      create table usage_daily_token (
        organization_id bigint not null references organizations (id) on delete cascade,
        day date not null,
        token_id bigint not null,
        api_calls bigint not null default 0,
        transfer_bytes bigint not null default 0,
        primary key (organization_id, day, token_id)
      );
    `);
    this.addSql(PROCESSED_EVENT_TABLE_SQL);
  }
}
