-- record_count_add: adds p_delta to the count of table p_table_id in record_count, how many
-- records each table holds, so that a list without a filter answers its exact total without
-- counting the table. The sum of a table's delta rows is its count, in any snapshot.
--
-- A table's count is spread over slots, so that concurrent writers do not queue on one row: the
-- change goes to the slot of the caller's connection (pg_backend_pid() % 1024) when no other
-- transaction holds that row (for update skip locked: it never waits, so writers never
-- deadlock here), else to a new row of that slot. A table so has about one row per connection
-- that wrote it; updates are in place (HOT), so the rows do not churn. The triggers of both
-- storages call it (record_count_change.sql, user_table_rows_change.sql).
create or replace function record_count_add(p_table_id bigint, p_delta bigint) returns void
language plpgsql
set search_path from current
as $add$
declare
  v_slot integer := pg_backend_pid() % 1024;
  v_id bigint;
begin
  if p_delta = 0 then
    return;
  end if;
  select id into v_id from record_count
  where table_id = p_table_id and slot = v_slot
  limit 1 for update skip locked;
  if found then
    update record_count set delta = delta + p_delta where id = v_id;
  else
    insert into record_count (table_id, slot, delta) values (p_table_id, v_slot, p_delta);
  end if;
end
$add$;
