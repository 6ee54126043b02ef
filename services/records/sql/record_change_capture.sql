-- record_change_capture: a write's record changes reach the table's change log in the write's
-- own transaction. Records writes them as one outbox row of subject `records.changes` (a JSON
-- payload, see change-set.ts), in the statement that writes its other events; this trigger
-- turns that row into one record_change row per change, in the write's order, and keeps it out
-- of the outbox (it is never published). The changes so commit or roll back with the write,
-- and `at` is the write's now(), the records' updated_at. Positions come later
-- (record_change_sequence.sql).
create or replace function record_change_capture() returns trigger
language plpgsql
set search_path from current
as $capture$
declare
  v_write jsonb := convert_from(new.payload, 'UTF8')::jsonb;
begin
  insert into record_change (
    table_id, organization_id, database_id, row_id, type, actor_type, actor_id, data, previous,
    changed_fields, created_at, updated_at
  )
  select
    (v_write->>'table_id')::bigint,
    (v_write->>'organization_id')::bigint,
    (v_write->>'database_id')::bigint,
    (c.item->>'row_id')::bigint,
    c.item->>'type',
    v_write->'actor'->>'type',
    (v_write->'actor'->>'id')::bigint,
    c.item->'data',
    c.item->'previous',
    case when c.item ? 'changed_fields'
      then array(select jsonb_array_elements_text(c.item->'changed_fields')) end,
    coalesce(to_timestamp((c.item->>'created_ms')::double precision / 1000), now()),
    coalesce(to_timestamp((c.item->>'updated_ms')::double precision / 1000), now())
  from jsonb_array_elements(v_write->'changes') with ordinality as c(item, n)
  order by c.n;
  return null;
end
$capture$;

create or replace trigger record_change_capture
  before insert on outbox
  for each row when (new.subject = 'records.changes')
  execute function record_change_capture();
