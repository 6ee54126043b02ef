-- take_records: the record quota. It counts p_count records against the organization's limit
-- (record_usage.sql, record_usage_add.sql), false when they do not fit; parallel creates never
-- overshoot the plan. Each count is read with a fresh snapshot (a VOLATILE function's queries
-- each take one), after the lock where it says so.
--
-- Exact (the organization near its limit): the organization's usage lock, exclusively, and the
-- sum of its shares read after it. The lock is held to the commit, so the organization's other
-- creates wait for the commit, and a create takes it last (its records written before).
--
-- Shared (far from the limit, which most creates are): the same lock, shared, so that parallel
-- creates do not wait for each other. Whoever holds it shared has counted at most
-- c_most_shared records not yet committed (one shared count per transaction, of at most that
-- many), and at most max_connections + max_prepared_transactions transactions are open at
-- once: so the count not yet committed is at most v_open, and a create that finds the
-- committed sum (read after taking the lock) at least v_open under the limit with its own
-- records cannot overshoot it, whatever the others do. An exact count waits for every shared
-- one to commit. The sum is first read before the lock with twice the margin, so that the
-- second read, under the lock, almost never fails; when it does, the create counts exactly,
-- asking for the lock exclusively while it holds it shared (two such creates at once would
-- deadlock, and PostgreSQL fails one of them: the call answers 503 and can be tried again).
create or replace function take_records(
  p_organization_id bigint, p_count bigint, p_limit bigint
) returns boolean language plpgsql volatile
set search_path from current
as $take$
declare
  c_most_shared constant bigint := 1000;
  v_lock bigint := hashtextextended('records.usage:' || p_organization_id, 0);
  v_open bigint := c_most_shared * (
    current_setting('max_connections')::bigint
    + current_setting('max_prepared_transactions')::bigint
  );
begin
  if p_count <= c_most_shared
     and current_setting('rowbase.usage_shared', true) is distinct from 'on'
     and record_usage(p_organization_id) <= p_limit - p_count - 2 * v_open then
    perform pg_advisory_xact_lock_shared(v_lock);
    perform set_config('rowbase.usage_shared', 'on', true);
    if record_usage(p_organization_id) <= p_limit - p_count - v_open then
      perform record_usage_add(p_organization_id, p_count);
      return true;
    end if;
  end if;
  perform pg_advisory_xact_lock(v_lock);
  if record_usage(p_organization_id) > p_limit - p_count then
    return false;
  end if;
  perform record_usage_add(p_organization_id, p_count);
  return true;
end
$take$;
