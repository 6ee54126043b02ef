-- record_usage_add: adds p_delta to the records organization p_organization_id counts
-- (record_usage.sql), in one of its shares, so that writers do not queue on one row: a share
-- no other transaction holds (for update skip locked: it never waits, so writers never
-- deadlock here), else a new one. An organization so has about as many shares as it ever had
-- writers at once. A share may be negative. take_records.sql says how creates keep the count
-- under the plan's limit.
create or replace function record_usage_add(p_organization_id bigint, p_delta bigint)
returns void
language plpgsql
set search_path from current
as $add$
declare
  v_id bigint;
begin
  if p_delta = 0 then
    return;
  end if;
  select id into v_id from organization_usage_share
  where organization_id = p_organization_id
  limit 1 for update skip locked;
  if found then
    update organization_usage_share set records = records + p_delta where id = v_id;
  else
    insert into organization_usage_share (organization_id, records)
    values (p_organization_id, p_delta);
  end if;
end
$add$;
