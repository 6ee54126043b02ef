import { Migration } from "@mikro-orm/migrations";

/**
 * `record_change`: each table's log of record changes (docs/changes.md). A write adds its
 * changes in its own transaction, through the outbox (sql/record_change_capture.sql), with no
 * `position`; the sequencer (sql/record_change_sequence.sql) gives committed changes their
 * `position` later, one sequencer at a time, in the order it finds them. A reader sees only
 * changes with a position, so positions appear in order and a cursor (table, position) never
 * has a change appear behind it. Positions are global, so a table's are increasing but not
 * consecutive; `record_change_trim.through` is the last position retention removed of a table,
 * before which a cursor has expired.
 *
 * `data` is the record after the change (before it, for a deletion), keyed by field id, so that
 * the query language's `where` applies to it as to `record`; `created_at` and `updated_at` are
 * the record's.
 */
export class RecordChanges extends Migration {
  override up() {
    this.addSql(`
      create table record_change (
        id bigint generated always as identity primary key,
        position bigint,
        table_id bigint not null,
        organization_id bigint not null,
        database_id bigint not null,
        row_id bigint not null,
        type text not null check (type in ('created', 'updated', 'deleted')),
        actor_type text not null,
        actor_id bigint not null,
        data jsonb not null check (jsonb_typeof(data) = 'object'),
        previous jsonb,
        changed_fields text[],
        created_at timestamptz not null,
        updated_at timestamptz not null,
        at timestamptz not null default now(),
        sequenced_at timestamptz
      );
      create unique index record_change_table_position on record_change (table_id, position);
      create index record_change_unsequenced on record_change (id) where position is null;
      create index record_change_sequenced_at on record_change (sequenced_at);

      create table record_change_log (
        only_row boolean primary key default true check (only_row),
        last_position bigint not null default 0
      );
      insert into record_change_log default values;

      create table record_change_trim (
        table_id bigint primary key,
        through bigint not null
      );
    `);
  }
}
