-- record_usage: the records organization p_organization_id counts against its plan's limit:
-- its organization_usage row (what was counted before shares, and what a previous version's
-- replica changes while both versions run) plus its shares (record_usage_add.sql). PL/pgSQL
-- rather than SQL: its plan is kept per connection (an SQL function with its own search_path
-- is planned on every call, a tenth of a millisecond). STABLE: it reads with the snapshot of
-- the statement that calls it (take_records calls it for a fresh one).
create or replace function record_usage(p_organization_id bigint) returns bigint
language plpgsql stable
set search_path from current
as $usage$
begin
  return coalesce((select records from organization_usage
                   where organization_id = p_organization_id), 0)
       + coalesce((select sum(records) from organization_usage_share
                   where organization_id = p_organization_id), 0)::bigint;
end
$usage$;
