-- create_checks: what a create must pass before its records are counted against the plan, in
-- the create's own statement.
--
-- It takes the organization's and the table's shared advisory locks for the rest of the
-- create's transaction (a deletion of either takes them exclusively, so a create either commits
-- before the deletion removes what it holds, or runs after it and finds its mark), then
-- answers, in this order:
--   gone        the table or its organization is deleted (deleted_table, deleted_organization);
--   stale       the table has an autonumber field the create does not number: its schema was
--               read before the field was added, and records it inserted after the field's
--               existing records were numbered would never get a number. p_autonumber_fields
--               are the fields the create numbers (null: do not look). A field's counter row
--               exists from the moment its numbering starts, under the table's exclusive lock;
--               a deleted field's counter is kept, marked deleted, and is not looked at;
--   (write_gate's answer for p_fields and p_pending_checked when it is not ok);
--   over_limit  the create alone is larger than the limit;
--   ok          otherwise.
-- As write_gate, a create is refused at once while the table's values are being converted, and
-- waits at most 5 s for the locks (its lock_timeout): it never lands after its client gave up.
-- A VOLATILE function's queries each read a fresh snapshot, so the marks looked for after a
-- wait on a deletion's lock include the one it committed. It leaves the quota to the caller
-- (reserve_records after the insert, or create_gate), since the usage lock it takes is held
-- until the commit.
create or replace function create_checks(
  p_table_id bigint, p_organization_id bigint, p_count bigint, p_limit bigint,
  p_autonumber_fields bigint[], p_fields bigint[], p_pending_checked bigint[]
) returns text language plpgsql volatile
set search_path from current
set lock_timeout = '5s'
as $gate$
declare
  v_written text;
begin
  if not pg_try_advisory_xact_lock_shared(hashtextextended('records.conversion:' || p_table_id, 0))
  then
    raise exception 'table % is being converted', p_table_id using errcode = 'lock_not_available';
  end if;
  perform pg_advisory_xact_lock_shared(
            hashtextextended('records.organization:' || p_organization_id, 0)),
          pg_advisory_xact_lock_shared(hashtextextended('records.table:' || p_table_id, 0));
  if exists (select 1 from deleted_table where table_id = p_table_id)
     or exists (select 1 from deleted_organization where organization_id = p_organization_id)
  then
    return 'gone';
  end if;
  if p_autonumber_fields is not null and exists (
    select 1 from autonumber_counter
    where table_id = p_table_id and not deleted and field_id <> all (p_autonumber_fields)
  ) then
    return 'stale';
  end if;
  v_written := write_gate(p_table_id, p_fields, p_pending_checked);
  if v_written <> 'ok' then
    return v_written;
  end if;
  if p_count > p_limit then
    return 'over_limit';
  end if;
  return 'ok';
end
$gate$;
