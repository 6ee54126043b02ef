import { Migration } from "@mikro-orm/migrations";
import { lz4CompressionSql } from "@rowbase/kit";

/**
 * `changes_json`: a write's changes in the change log as `json`, the text the write handed
 * over, checked but not rebuilt. As `jsonb`, PostgreSQL built a binary document of every
 * write's changes in the capture trigger, which for a batch of 1,000 created records cost
 * about four times the CPU of checking them (test/bench/README.md, "The change log and the
 * audit groups as json"); the log is read a page at a time, which parses only the writes the
 * page reaches. A write logged before this keeps its changes in `changes` (now nullable); a
 * new one leaves it null. The view `record_change` reads either and keeps its columns and
 * their types (`data` and `previous` stay `jsonb`, made per change read).
 *
 * The two checks hold for the rows written from now on (`not valid`: the rows already logged
 * have `changes` only, which they allow, and scanning the log for them here would hold its
 * lock for the whole scan). Adding the column rewrites nothing; lz4 as `changes`.
 */
export class RecordChangesJson extends Migration {
  override up() {
    this.addSql(`
      alter table record_change_write
        add column changes_json json,
        alter column changes drop not null,
        add constraint record_change_write_one_form
          check ((changes is null) <> (changes_json is null)) not valid,
        add constraint record_change_write_changes_json_array
          check (json_typeof(changes_json) = 'array') not valid;

      create or replace view record_change as
      select
        w.last_position - w.size + e.ordinal as position,
        w.table_id,
        w.organization_id,
        w.database_id,
        (e.item->>'row_id')::bigint as row_id,
        e.item->>'type' as type,
        w.actor_type,
        w.actor_id,
        (e.item->'data')::jsonb as data,
        (e.item->'previous')::jsonb as previous,
        case when e.item->'changed_fields' is not null
          then array(select json_array_elements_text(e.item->'changed_fields')) end
          as changed_fields,
        coalesce(to_timestamp((e.item->>'created_ms')::double precision / 1000), w.at) as created_at,
        coalesce(to_timestamp((e.item->>'updated_ms')::double precision / 1000), w.at) as updated_at,
        w.at,
        w.sequenced_at,
        w.last_position as write_position,
        e.ordinal
      from record_change_write w
      cross join lateral json_array_elements(coalesce(w.changes_json, w.changes::json))
        with ordinality as e(item, ordinal);
    `);
    this.addSql(lz4CompressionSql(["record_change_write.changes_json"]));
  }
}
