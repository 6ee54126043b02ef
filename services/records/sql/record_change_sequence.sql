-- record_change_sequence: gives up to p_limit committed changes without a position the next
-- positions, in the order they were written (id), and returns the last position given (the
-- present end of every table's log). One sequencer runs at a time (the advisory lock, held to
-- the commit): each sees the positions of the one before it committed, so positions become
-- visible in increasing order and a reader past position p never has a change appear at or
-- before p. A change whose write commits late gets a later position than changes written after
-- it: the log is in the order changes were found committed, which a change whose write had
-- answered is always found before the next sequencing ends.
create or replace function record_change_sequence(p_limit integer) returns bigint
language plpgsql
set search_path from current
as $sequence$
declare
  v_last bigint;
  v_given bigint;
begin
  perform pg_advisory_xact_lock(hashtextextended('rowbase.record-change-sequence', 0));
  select last_position into v_last from record_change_log;
  with pending as (
    select id, row_number() over (order by id) as n
    from record_change where position is null
    order by id limit p_limit
  ), given as (
    update record_change c set position = v_last + pending.n, sequenced_at = clock_timestamp()
    from pending where c.id = pending.id
    returning c.position
  )
  select max(position) into v_given from given;
  if v_given is not null then
    update record_change_log set last_position = v_given;
    return v_given;
  end if;
  return v_last;
end
$sequence$;
