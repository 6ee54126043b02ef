-- user_table_count_change: keeps record_count (record_count_add.sql) for a user table, the
-- PostgreSQL table of one table's records in its organization's schema. Each user table has an
-- insert and a delete trigger that run it once per statement, with the table's id as their one
-- argument (ddl.ts, createTableSql), so the count changes in the transaction that inserts or
-- deletes the records, whatever the writer.
create or replace function user_table_count_change() returns trigger language plpgsql
set search_path from current
as $count$
declare
  v_count bigint;
begin
  if tg_op = 'INSERT' then
    select count(*) into v_count from new_rows;
  else
    select -count(*) into v_count from old_rows;
  end if;
  perform record_count_add(tg_argv[0]::bigint, v_count);
  return null;
end
$count$;
