-- record_change_sequence: gives up to p_limit committed writes without positions the next
-- positions, in the order they were written (id), each write one block of as many positions as
-- it has changes (its last one in last_position), and returns the last position given (the
-- present end of every table's log). One row is updated per write, whatever its number of
-- changes. One sequencer runs at a time (the advisory lock, held to the commit): each sees the
-- positions of the one before it committed, so positions become visible in increasing order
-- and a reader past position p never has a change appear at or before p. A write that commits
-- late gets later positions than writes made after it: the log is in the order writes were
-- found committed, which a write that had answered is always found before the next sequencing
-- ends.
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
    select id, sum(size) over (order by id) as through
    from record_change_write where last_position is null
    order by id limit p_limit
  ), given as (
    update record_change_write w
    set last_position = v_last + pending.through, sequenced_at = clock_timestamp()
    from pending where w.id = pending.id
    returning w.last_position
  )
  select max(last_position) into v_given from given;
  if v_given is not null then
    update record_change_log set last_position = v_given;
    return v_given;
  end if;
  return v_last;
end
$sequence$;
