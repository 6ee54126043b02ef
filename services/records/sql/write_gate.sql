-- write_gate: what a write must know of the table's fields beyond the schema it was checked
-- against, which can be older than catalog's last change (the cached schema, or one read just
-- before the change).
--
-- It takes the table's shared advisory lock for the rest of the write's transaction (a field's
-- deletion and a type change's check take it exclusively), then answers:
--   stale    one of p_fields, the fields the write holds values for, is deleted
--            (deleted_field): the write would store a value no field shows;
--   pending  a live, unlifted mark in pending_type_change holds the write: a type change of one
--            of p_fields, or the table's field being made required (a write leaves a field empty
--            by not naming it, so a required mark holds every write), and the mark is not among
--            p_pending_checked, the marks the write checked its values against. Catalog commits
--            a change after its check, so a write checked against the old type can land in
--            between; it must check its values against the change too, or the conversion would
--            clear a value the client was told was stored;
--   ok       otherwise.
-- A type change converting the table's values (minutes on millions of records) also holds the
-- table's conversion lock ('records.conversion:<table id>'), which a write only tries: while it
-- is held, the write is refused at once with lock_not_available (55P03), writes nothing, and
-- answers 503 with Retry-After. A write waiting for the conversion would hold the table's ROW
-- EXCLUSIVE lock (taken as its statement starts), which the conversion's last statements need.
-- The wait for the write lock held by anything else is at most 5 s (the function's
-- lock_timeout; WRITE_LOCK_TIMEOUT_MS in src/db/create-gate.ts), refused the same way past it:
-- a write that waited longer than its client (the gateway's 10 s) would be applied after the
-- client was told 503.
-- A VOLATILE function's queries each read a fresh snapshot, so the marks looked for after a wait
-- on the lock include the one its holder committed. An update calls it in the statement that
-- locks its records (or writes one record as it was read); a create through create_checks or
-- create_gate.
create or replace function write_gate(
  p_table_id bigint, p_fields bigint[], p_pending_checked bigint[]
) returns text language plpgsql volatile
set search_path from current
set lock_timeout = '5s'
as $gate$
begin
  if not pg_try_advisory_xact_lock_shared(hashtextextended('records.conversion:' || p_table_id, 0))
  then
    raise exception 'table % is being converted', p_table_id using errcode = 'lock_not_available';
  end if;
  perform pg_advisory_xact_lock_shared(hashtextextended('records.table:' || p_table_id, 0));
  if exists (
    select 1 from deleted_field where table_id = p_table_id and field_id = any (p_fields)
  ) then
    return 'stale';
  end if;
  if exists (
    select 1 from pending_type_change
    where table_id = p_table_id and (field_id = any (p_fields) or required)
      and lifted_by is null and expires_at > now() and id <> all (p_pending_checked)
  ) then
    return 'pending';
  end if;
  return 'ok';
end
$gate$;
