-- take_records: the record quota. It counts p_count records against the organization's limit on
-- its organization_usage row, through one conditional upsert (records + n <= limit), so that
-- parallel creates never overshoot the plan; false when they do not fit. The row stays locked
-- until the commit, so a create takes it last: the organization's other creates then wait for
-- the commit, not for the whole insert.
create or replace function take_records(
  p_organization_id bigint, p_count bigint, p_limit bigint
) returns boolean language plpgsql volatile
set search_path from current
as $take$
begin
  insert into organization_usage as u (organization_id, records)
  values (p_organization_id, p_count)
  on conflict (organization_id) do update set records = u.records + excluded.records
    where u.records + excluded.records <= p_limit;
  return found;
end
$take$;
