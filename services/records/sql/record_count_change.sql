-- record_count_change: keeps record_count, how many records each table holds, so that a list
-- without a filter answers its exact total without counting the table's index entries. The sum
-- of a table's delta rows is its count, in any snapshot: these triggers on record write them in
-- the transaction that inserts or deletes the records, whatever the writer (a replica of any
-- version, a deletion, a test). Updates never move a record to another table.
--
-- A table's count is spread over slots, so that concurrent writers do not queue on one row: a
-- statement adds its change to the slot of its connection (pg_backend_pid() % 1024) when no
-- other transaction holds that row (for update skip locked: it never waits, so writers never
-- deadlock here), else to a new row of that slot. A table so has about one row per connection
-- that wrote it; updates are in place (HOT), so the rows do not churn.
create or replace function record_count_change() returns trigger language plpgsql
set search_path from current
as $count$
declare
  v_slot integer := pg_backend_pid() % 1024;
  v_tables bigint[];
  v_counts bigint[];
  v_id bigint;
begin
  if tg_op = 'INSERT' then
    select array_agg(table_id), array_agg(n) into v_tables, v_counts
    from (select table_id, count(*) as n from new_records group by table_id) changed;
  else
    select array_agg(table_id), array_agg(-n) into v_tables, v_counts
    from (select table_id, count(*) as n from old_records group by table_id) changed;
  end if;
  for i in 1 .. coalesce(array_length(v_tables, 1), 0) loop
    select id into v_id from record_count
    where table_id = v_tables[i] and slot = v_slot
    limit 1 for update skip locked;
    if found then
      update record_count set delta = delta + v_counts[i] where id = v_id;
    else
      insert into record_count (table_id, slot, delta)
      values (v_tables[i], v_slot, v_counts[i]);
    end if;
  end loop;
  return null;
end
$count$;

create or replace trigger record_count_insert after insert on record
  referencing new table as new_records
  for each statement execute function record_count_change();
create or replace trigger record_count_delete after delete on record
  referencing old table as old_records
  for each statement execute function record_count_change();
