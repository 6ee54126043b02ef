import { Migration } from "@mikro-orm/migrations";

/**
 * `record_count`: how many records each table holds, so that a list without a filter answers its
 * exact `total` without counting the table's index entries (100,000 records took 4-5 ms of
 * PostgreSQL per page, a million ten times that). The sum of a table's `delta` rows is its
 * count, in any snapshot: triggers on `record` write the rows in the transaction that inserts or
 * deletes the records, whatever the writer (a replica of any version, a deletion saga, a test).
 *
 * Each statement adds one row per table it changed, and folds into it the table's rows that no
 * other transaction holds (`for update skip locked`: it never waits, so writers never deadlock
 * here), so a table keeps about as many rows as it has concurrent writers; a fold that comes to
 * 0 leaves no row (an emptied or deleted table). Updates never move a record to another table.
 * The table's lock keeps writes out while the migration counts what is there.
 */
export class RecordCounts extends Migration {
  override up() {
    this.addSql(`
      create table record_count (
        table_id bigint not null,
        delta bigint not null
      );
      create index record_count_table on record_count (table_id);

      lock table record in share row exclusive mode;
      insert into record_count (table_id, delta)
      select table_id, count(*) from record group by table_id;

      create function record_count_change() returns trigger language plpgsql
      set search_path from current
      as $count$
      declare
        v_tables bigint[];
        v_counts bigint[];
      begin
        if tg_op = 'INSERT' then
          select array_agg(table_id), array_agg(n) into v_tables, v_counts
          from (select table_id, count(*) as n from new_records group by table_id) changed;
        else
          select array_agg(table_id), array_agg(-n) into v_tables, v_counts
          from (select table_id, count(*) as n from old_records group by table_id) changed;
        end if;
        if v_tables is null then
          return null;
        end if;
        with folded as (
          delete from record_count
          where table_id = any (v_tables)
            and ctid = any (array(
              select ctid from record_count where table_id = any (v_tables)
              for update skip locked
            ))
          returning table_id, delta
        )
        insert into record_count (table_id, delta)
        select table_id, sum(n) from (
          select * from unnest(v_tables, v_counts) as changed (table_id, n)
          union all
          select table_id, delta from folded
        ) counted
        group by table_id
        having sum(n) <> 0;
        return null;
      end
      $count$;

      create trigger record_count_insert after insert on record
        referencing new table as new_records
        for each statement execute function record_count_change();
      create trigger record_count_delete after delete on record
        referencing old table as old_records
        for each statement execute function record_count_change();
    `);
  }
}
