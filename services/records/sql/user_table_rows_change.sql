-- user_table_rows_change: what a user table's inserts and deletes change in records' global
-- tables. A user table is the PostgreSQL table of one table's records in its organization's
-- schema; each has an insert and a delete trigger that run this once per statement, with the
-- table's id as their one argument (ddl.ts, createTableSql), so both follow in the transaction
-- that writes the rows, whatever the writer (a create, the upgrade's move, a test):
--   record_count  the table's count (record_count_add.sql), so that a list without a filter
--                 answers its exact total without counting the table;
--   row_range     where new row ids live: row ids come from one global sequence and a row id
--                 alone must find its record (the file routes name records by row id), so each
--                 insert notes its ids as ranges of consecutive ids (usually one per statement;
--                 another writer's ids taken in between split it). Deletes leave the ranges:
--                 whoever looks a row id up reads the row itself afterwards.
create or replace function user_table_rows_change() returns trigger language plpgsql
set search_path from current
as $rows$
declare
  v_table_id bigint := tg_argv[0]::bigint;
  v_count bigint;
  v_first bigint;
  v_last bigint;
begin
  if tg_op = 'INSERT' then
    select count(*), min(row_id), max(row_id) into v_count, v_first, v_last from new_rows;
    if v_last - v_first + 1 = v_count then
      -- One range (row ids are unique): no second pass over the rows to split them.
      insert into row_range (table_id, ids) values (v_table_id, int8range(v_first, v_last, '[]'));
    elsif v_count > 0 then
      insert into row_range (table_id, ids)
      select v_table_id, int8range(min(row_id), max(row_id), '[]')
      from (select row_id, row_id - row_number() over (order by row_id) as island from new_rows) ids
      group by island;
    end if;
  else
    select -count(*) into v_count from old_rows;
  end if;
  perform record_count_add(v_table_id, v_count);
  return null;
end
$rows$;
