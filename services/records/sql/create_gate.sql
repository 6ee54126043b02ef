-- create_gate: create_checks and then the quota (take_records), for a create of several
-- statements (one that numbers autonumber fields, or writes under pending type changes), which
-- calls it as the last statement of its transaction, the usage lock it takes held until the
-- commit. Answers create_checks' answer when it is not ok, over_limit when the
-- records do not fit the organization's limit, else ok; anything but ok makes the caller roll
-- back.
create or replace function create_gate(
  p_table_id bigint, p_organization_id bigint, p_count bigint, p_limit bigint,
  p_autonumber_fields bigint[], p_fields bigint[], p_pending_checked bigint[]
) returns text language plpgsql volatile
set search_path from current
as $gate$
declare
  v_checked text := create_checks(p_table_id, p_organization_id, p_count, p_limit,
    p_autonumber_fields, p_fields, p_pending_checked);
begin
  if v_checked <> 'ok' then
    return v_checked;
  end if;
  return case when take_records(p_organization_id, p_count, p_limit)
    then 'ok' else 'over_limit' end;
end
$gate$;
