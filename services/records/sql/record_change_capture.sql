-- record_change_capture: a write's record changes reach the table's change log in the write's
-- own transaction. Records writes them as one outbox row of subject `records.changes` (a JSON
-- payload, see change-set.ts), in the statement that writes its other events; this trigger
-- turns that row into one record_change_write row holding the write's changes as they came (a
-- JSON array, in the write's order, kept as json text in `changes_json`), and keeps it out of
-- the outbox (it is never published).
-- The changes so commit or roll back with the write, whatever their number in one row, and
-- `at` is the write's now(), the records' updated_at. Positions come later
-- (record_change_sequence.sql); the view record_change shows the changes one per row
-- (migrations/record-change-writes.ts, record-changes-json.ts).
create or replace function record_change_capture() returns trigger
language plpgsql
set search_path from current
as $capture$
declare
  -- As json: checked, not built into a jsonb document (migrations/record-changes-json.ts).
  v_write record;
  v_size integer;
begin
  select * into v_write
  from json_to_record(convert_from(new.payload, 'UTF8')::json) as w(
    table_id bigint, organization_id bigint, database_id bigint, actor json, changes json
  );
  v_size := json_array_length(v_write.changes);
  if v_size > 0 then
    insert into record_change_write (
      size, table_id, organization_id, database_id, actor_type, actor_id, changes_json
    ) values (
      v_size,
      v_write.table_id,
      v_write.organization_id,
      v_write.database_id,
      v_write.actor->>'type',
      (v_write.actor->>'id')::bigint,
      v_write.changes
    );
  end if;
  return null;
end
$capture$;

create or replace trigger record_change_capture
  before insert on outbox
  for each row when (new.subject = 'records.changes')
  execute function record_change_capture();
