// Autonumber fields: the numbers a create takes from a field's counter, and the numbers a new
// autonumber field gives the table's existing records.

import type { EntityManager } from "@mikro-orm/postgresql";
import { query } from "@rowbase/kit";
import { lockTableExclusive } from "./create-gate.js";
import { CHUNK_RESULT, inChunks, RECORD_CHUNK } from "./schema-changes.js";

/**
 * The next `count` numbers of an autonumber field, the first of them returned. The counter row
 * stays locked until the transaction ends, so numbers are unique and follow creation order.
 * Undefined when the field is deleted (the caller's schema is older than the deletion).
 */
export async function takeAutonumbers(
  em: EntityManager,
  tableId: bigint,
  fieldId: string,
  count: number,
): Promise<number | undefined> {
  const rows = await query<{ last_value: string }>(
    em,
    `insert into autonumber_counter (table_id, field_id, last_value) values ($1, $2, $3)
     on conflict (table_id, field_id)
       do update set last_value = autonumber_counter.last_value + excluded.last_value
       where not autonumber_counter.deleted
     returning last_value`,
    [tableId, fieldId, count],
    { prepare: true },
  );
  const [row] = rows;
  return row && Number(row.last_value) - count + 1;
}

/** The numbers an autonumber field's existing records get (`reserveAutonumbers`). */
export interface AutonumberReservation {
  /** The records are numbered after it, from `after + 1` on. */
  after: number;
  /** How many numbers are reserved: the records without a value when it was made. */
  count: number;
  /** The last record created then: later ones number themselves from the counter. */
  lastRowId: string;
}

/**
 * Starts an autonumber field's counter (kept as it is when it exists) and reserves a number for
 * each record of the table without a value for the field, under the table's exclusive lock:
 * creates hold the lock shared until they commit, so every one that got in before is counted,
 * and every one after finds the counter (`create_gate`'s `stale`) and numbers itself past the
 * reservation. `numberReserved` then gives the numbers out. Safe to repeat: a repeat reserves
 * for the records still without a number (the numbers of a reservation cut short stay unused).
 */
export async function reserveAutonumbers(
  em: EntityManager,
  tableId: bigint,
  fieldId: string,
): Promise<AutonumberReservation> {
  await lockTableExclusive(em, tableId);
  const [unnumbered] = await query<{ count: string; last_row_id: string | null }>(
    em,
    `select count(*) as count, max(row_id)::text as last_row_id
     from record where table_id = $1 and not (data ? $2::text)`,
    [tableId, fieldId],
  );
  const count = Number(unnumbered!.count);
  const [counter] = await query<{ last_value: string }>(
    em,
    `insert into autonumber_counter (table_id, field_id, last_value) values ($1, $2, $3)
     on conflict (table_id, field_id) do update set last_value = autonumber_counter.last_value + $3
     returning last_value`,
    [tableId, fieldId, count],
  );
  return {
    after: Number(counter!.last_value) - count,
    count,
    lastRowId: unnumbered!.last_row_id ?? "0",
  };
}

/**
 * Gives a reservation's numbers to the records it was made for, in creation order, `chunk`
 * records per statement, each committed on its own (call it outside a transaction) and
 * without the table's lock: as one statement under the lock, a large table's writes waited for
 * all of it. A record deleted meanwhile takes no number, so the numbers given stay within the
 * reservation; a patch of a record not numbered yet is numbered after it (its chunk checks the
 * record again once the patch commits). Chunks lock their records in row_id order, as writes
 * do. Returns how many records it numbered.
 */
export async function numberReserved(
  em: EntityManager,
  tableId: bigint,
  fieldId: string,
  reservation: AutonumberReservation,
  chunk = RECORD_CHUNK,
): Promise<number> {
  if (reservation.count === 0) return 0;
  return inChunks(
    em,
    `with chunk as materialized (
       select row_id, row_number() over (order by row_id) as n from (
         select row_id from record
         where table_id = $1 and row_id > $3 and row_id <= $4 and not (data ? $2::text)
         order by row_id limit $6 for update
       ) locked
     ), changed as (
       update record r set data = r.data || jsonb_build_object($2::text, $5::bigint + chunk.n)
       from chunk where r.table_id = $1 and r.row_id = chunk.row_id
       returning 1
     )
     ${CHUNK_RESULT}`,
    (after, numbered) => [
      tableId,
      fieldId,
      after,
      reservation.lastRowId,
      reservation.after + numbered,
      chunk,
    ],
    (_, numbered) => numbered < reservation.count,
  );
}
