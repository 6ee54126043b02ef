import { Migration } from "@mikro-orm/migrations";

/**
 * `row_id_seq`: the one sequence every record's row id comes from, whichever storage holds it
 * (so that a row id alone finds its record). It was `record`'s identity, which would go with
 * `record` when the upgrade drops it (docs/records-storage.md, step 6); this takes its place at
 * the value it had. ALTER SEQUENCE holds a lock that nextval waits for, so no id is given
 * between the read and the swap. The new sequence is `record.row_id`'s default and owned by it
 * until the upgrade drops `record`, so that `pg_get_serial_sequence('record', 'row_id')`, which
 * the previous version's replicas ask, finds it while both versions run.
 */
export class RowIdSequence extends Migration {
  override up() {
    this.addSql(`
      do $row_id$
      declare
        v_identity regclass := pg_get_serial_sequence('record', 'row_id')::regclass;
        v_last bigint;
        v_called boolean;
      begin
        execute format('alter sequence %s no cycle', v_identity);
        execute format('select last_value, is_called from %s', v_identity)
          into v_last, v_called;
        create sequence row_id_seq as bigint;
        perform setval('row_id_seq', v_last, v_called);
        alter table record alter column row_id drop identity;
        alter table record alter column row_id set default nextval('row_id_seq');
        alter sequence row_id_seq owned by record.row_id;
      end
      $row_id$;
    `);
  }
}
