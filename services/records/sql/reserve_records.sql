-- reserve_records: take_records for a create of one statement, called after its insert: when
-- the records do not fit the organization's limit it raises SQLSTATE RB001, so that the
-- statement writes nothing (records, events and all); otherwise it answers 'ok'.
create or replace function reserve_records(
  p_organization_id bigint, p_count bigint, p_limit bigint
) returns text language plpgsql volatile
set search_path from current
as $reserve$
begin
  if not take_records(p_organization_id, p_count, p_limit) then
    raise exception 'the organization''s record limit is reached'
      using errcode = 'RB001';
  end if;
  return 'ok';
end
$reserve$;
