import { Migration } from "@mikro-orm/migrations";

/**
 * `record_change_write`: a table's change log holds one row per write, not per change
 * (docs/changes.md, "How it is built"): `changes` is the write's changes as it handed them
 * (a JSON array, in its order), `size` their number. The sequencer gives a write its positions
 * as one block, `last_position - size + 1` through `last_position`, so its cost follows the
 * writes, not the records.
 *
 * The view `record_change` shows the log one row per change, as the table of that name did:
 * it expands a write into its changes in the write's order, the one at `ordinal` n (from 1) at
 * `position` `last_position - size + n` (null until the write is sequenced). `write_position`
 * (the write's last position) and `ordinal` are the log's order, kept by the index on
 * `(table_id, last_position)`: a reader orders by them rather than by `position`, so that
 * PostgreSQL expands only the writes it reaches. `created_at` and `updated_at` are the
 * record's, the write's `at` where the write did not name them; `data` is the record after the
 * change (before it, for a deletion), keyed by field id, for the query language's jsonb form.
 *
 * The changes already logged move over as blocks of one, their positions and `sequenced_at`
 * kept (so every cursor handed out still reads on from where it was), those not sequenced yet
 * without a position, in their order, for the sequencer to give them one. The old table goes;
 * the view takes its name, so that a replica of the previous version still reads the log while
 * both versions run (it cannot delete through it: its retention and its forgetting of a
 * deleted table's changes fail and are retried until the new version's replicas do them).
 */
export class RecordChangeWrites extends Migration {
  override up() {
    this.addSql(`
      create table record_change_write (
        id bigint generated always as identity primary key,
        last_position bigint,
        size integer not null check (size > 0),
        table_id bigint not null,
        organization_id bigint not null,
        database_id bigint not null,
        actor_type text not null,
        actor_id bigint not null,
        changes jsonb not null check (jsonb_typeof(changes) = 'array'),
        at timestamptz not null default now(),
        sequenced_at timestamptz
      );
      create unique index record_change_write_table_position
        on record_change_write (table_id, last_position);
      create index record_change_write_unsequenced on record_change_write (id)
        where last_position is null;
      create index record_change_write_sequenced_at on record_change_write (sequenced_at);

      insert into record_change_write (
        last_position, size, table_id, organization_id, database_id, actor_type, actor_id,
        changes, at, sequenced_at
      )
      select position, 1, table_id, organization_id, database_id, actor_type, actor_id,
        jsonb_build_array(
          jsonb_build_object(
            'type', type, 'row_id', row_id::text, 'data', data,
            'created_ms', extract(epoch from created_at) * 1000,
            'updated_ms', extract(epoch from updated_at) * 1000
          )
          || case when previous is null then '{}' else jsonb_build_object('previous', previous) end
          || case when changed_fields is null then '{}'
               else jsonb_build_object('changed_fields', to_jsonb(changed_fields)) end
        ),
        at, sequenced_at
      from record_change
      order by id;

      drop table record_change;
      create view record_change as
      select
        w.last_position - w.size + e.ordinal as position,
        w.table_id,
        w.organization_id,
        w.database_id,
        (e.item->>'row_id')::bigint as row_id,
        e.item->>'type' as type,
        w.actor_type,
        w.actor_id,
        e.item->'data' as data,
        e.item->'previous' as previous,
        case when e.item ? 'changed_fields'
          then array(select jsonb_array_elements_text(e.item->'changed_fields')) end as changed_fields,
        coalesce(to_timestamp((e.item->>'created_ms')::double precision / 1000), w.at) as created_at,
        coalesce(to_timestamp((e.item->>'updated_ms')::double precision / 1000), w.at) as updated_at,
        w.at,
        w.sequenced_at,
        w.last_position as write_position,
        e.ordinal
      from record_change_write w
      cross join lateral jsonb_array_elements(w.changes) with ordinality as e(item, ordinal);
    `);
  }
}
