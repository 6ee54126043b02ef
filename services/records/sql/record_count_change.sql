-- record_count_change: keeps record_count, how many records each table holds, so that a list
-- without a filter answers its exact total without counting the table's index entries. The sum
-- of a table's delta rows is its count, in any snapshot: these triggers on record write them in
-- the transaction that inserts or deletes the records, whatever the writer (a replica of any
-- version, a deletion, a test). Updates never move a record to another table.
--
-- Each table's change is added by record_count_add.sql.
--
-- An insert of records of a table stored in its own table (user_table) is refused with SQLSTATE
-- RB002: nothing reads them there. Only a create that chose the jsonb storage before the upgrade
-- moved its table, and then waited on the table's write lock for the move to commit, can try it;
-- it is to be sent again to the table's own storage.
--
-- The upgrade drops `record` and this function once every table has moved (src/upgrade.ts); on
-- such a database this file makes nothing.
do $record_count$
begin
  if to_regclass('record') is not null then
    create or replace function record_count_change() returns trigger language plpgsql
    set search_path from current
    as $count$
    declare
      v_change record;
    begin
      if tg_op = 'INSERT' then
        for v_change in select table_id, count(*) as n from new_records group by table_id loop
          if exists (select from user_table where table_id = v_change.table_id) then
            raise exception 'table % is stored in its own table', v_change.table_id
              using errcode = 'RB002';
          end if;
          perform record_count_add(v_change.table_id, v_change.n);
        end loop;
      else
        for v_change in select table_id, count(*) as n from old_records group by table_id loop
          perform record_count_add(v_change.table_id, -v_change.n);
        end loop;
      end if;
      return null;
    end
    $count$;

    create or replace trigger record_count_insert after insert on record
      referencing new table as new_records
      for each statement execute function record_count_change();
    create or replace trigger record_count_delete after delete on record
      referencing old table as old_records
      for each statement execute function record_count_change();
  end if;
end
$record_count$;
