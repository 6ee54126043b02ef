// What catalog's schema changes do to stored records: choice renames, deleted fields, the marks
// of pending type changes (and the writes noted under them), and the deletion of tables and
// organizations; most rewrite a table's records a chunk per statement (`inChunks`).

import type { JsonObject } from "@bufbuild/protobuf";
import type { EntityManager } from "@mikro-orm/postgresql";
import { query } from "@rowbase/kit";
import { lockOrganizationExclusive, lockTableExclusive } from "./create-gate.js";

/**
 * Records a catalog change that rewrites a table's records (`numberReserved`,
 * `sweepDeletedField`, `renameChoicesInChunks`, `deleteRecordsInChunks`) changes per statement,
 * at most: each statement holds only its records.
 */
export const RECORD_CHUNK = 1000;

/** What a chunk statement of `inChunks` answers, from its `chunk` and `changed` CTEs. */
export const CHUNK_RESULT = `select (select max(row_id) from chunk)::text as last,
  (select count(*) from changed)::int as changed`;

/**
 * Runs a chunk statement over a table's records in row_id order until it finds none, or until
 * `more` (given what the last chunk changed and what all did) says it is done; each statement
 * commits on its own. `params` gets the last row id of the chunk before (`"0"` first) and what
 * the chunks changed so far. Returns how many records they changed.
 */
export async function inChunks(
  em: EntityManager,
  sql: string,
  params: (after: string, changed: number) => unknown[],
  more: (inChunk: number, changed: number) => boolean,
): Promise<number> {
  let after = "0";
  let changed = 0;
  for (;;) {
    const [row] = await query<{ last: string | null; changed: number }>(
      em,
      sql,
      params(after, changed),
      { prepare: true },
    );
    if (!row?.last) return changed;
    changed += row.changed;
    after = row.last;
    if (!more(row.changed, changed)) return changed;
  }
}

/** A choice's rename: its old name and its new one. */
export type ChoiceRename = readonly [oldName: string, newName: string];

/**
 * Whether applying `renames` again changes nothing: no new name is also an old one (a swap or a
 * chain renames a value it renamed before). Only then may the records be renamed a chunk at a
 * time, and the records a write may have touched meanwhile renamed once more.
 */
export function renamesRepeatable(renames: readonly ChoiceRename[]): boolean {
  const olds = new Set(renames.map(([old]) => old));
  return renames.every(([, renamed]) => !olds.has(renamed));
}

/**
 * Records (`r`) of table $1 whose field $2 holds an old name of $3: a single select's string,
 * or a multi select's array holding one.
 */
const HOLDS_OLD_CHOICE = `(jsonb_typeof(r.data -> $2::text) = 'string' and r.data ->> $2::text = any($3::text[])
  or jsonb_typeof(r.data -> $2::text) = 'array' and (r.data -> $2::text) ?| $3::text[])`;

/** A matching record's field $2 with the old names $3 renamed to $4, all at once (swaps too). */
const RENAMED_DATA = `jsonb_set(r.data, array[$2::text], case jsonb_typeof(r.data -> $2::text)
  when 'string' then (
    select to_jsonb(m.new_name) from unnest($3::text[], $4::text[]) as m(old_name, new_name)
    where m.old_name = r.data ->> $2::text limit 1)
  else (
    select coalesce(jsonb_agg(to_jsonb(coalesce(m.new_name, item.name)) order by item.n), '[]'::jsonb)
    from jsonb_array_elements_text(r.data -> $2::text) with ordinality as item(name, n)
    left join unnest($3::text[], $4::text[]) as m(old_name, new_name) on m.old_name = item.name)
  end)`;

function renameParams(tableId: bigint, fieldId: string, renames: readonly ChoiceRename[]) {
  return [tableId, fieldId, renames.map(([old]) => old), renames.map(([, renamed]) => renamed)];
}

/** The table's last record now (`"0"` when it has none): where `renameChoicesInChunks` stops. */
export async function lastRowId(em: EntityManager, tableId: bigint): Promise<string> {
  const [row] = await query<{ last: string | null }>(
    em,
    "select max(row_id)::text as last from record where table_id = $1",
    [tableId],
  );
  return row?.last ?? "0";
}

/**
 * Renames stored select values of the table's records up to `upTo` (`lastRowId` before), a
 * chunk of the records holding an old name per statement, each committed on its own (call it
 * outside a transaction) and without the table's lock: as one statement under the lock, a large
 * table's writes waited for every record holding a renamed choice. For `renamesRepeatable`
 * renames only: a write that stores an old name in a record a chunk has passed is renamed by
 * `renameChoicesOf` afterwards (its pending check noted the record), and a record renamed twice
 * stays renamed. A patch under way is renamed after it (its chunk checks the record again once
 * the patch commits). Chunks lock their records in row_id order, as writes do. Returns how many
 * records they renamed.
 */
export async function renameChoicesInChunks(
  em: EntityManager,
  tableId: bigint,
  fieldId: string,
  renames: readonly ChoiceRename[],
  upTo: string,
  chunk = RECORD_CHUNK,
): Promise<number> {
  if (renames.length === 0) return 0;
  return inChunks(
    em,
    `with chunk as materialized (
       select row_id from record r
       where table_id = $1 and row_id > $5 and row_id <= $6 and ${HOLDS_OLD_CHOICE}
       order by row_id limit $7 for update
     ), changed as (
       update record r set data = ${RENAMED_DATA}
       from chunk where r.table_id = $1 and r.row_id = chunk.row_id
       returning 1
     )
     ${CHUNK_RESULT}`,
    (after) => [...renameParams(tableId, fieldId, renames), after, upTo, chunk],
    (renamed) => renamed === chunk,
  );
}

/**
 * Renames stored select values in one statement, in the caller's transaction (which holds the
 * table's exclusive lock): of the records after `after` (every record for `"0"`) and of the
 * records writes noted while the change was pending, but for those last written with the new
 * choices, which a swap would rename again: noted so, or written once the change was no longer
 * pending (`cleared`). Returns how many it renamed.
 */
export async function renameChoicesOf(
  em: EntityManager,
  tableId: bigint,
  fieldId: string,
  renames: readonly ChoiceRename[],
  after: string,
  cleared: ClearedChange = { writes: [], pendingUntil: undefined },
): Promise<number> {
  if (renames.length === 0) return 0;
  const { writes, pendingUntil } = cleared;
  const [row] = await query<{ renamed: number }>(
    em,
    `with changed as (
       update record r set data = ${RENAMED_DATA}
       where r.table_id = $1 and (r.row_id > $5 or r.row_id = any($6::bigint[]))
         and r.row_id <> all($7::bigint[]) and ${HOLDS_OLD_CHOICE}
         and ($8::bigint is null or r.updated_at < 'epoch'::timestamptz + $8::bigint * interval '1 microsecond')
       returning 1
     )
     select count(*)::int as renamed from changed`,
    [
      ...renameParams(tableId, fieldId, renames),
      after,
      writes.filter((write) => !write.asChanged).map((write) => write.rowId),
      writes.filter((write) => write.asChanged).map((write) => write.rowId),
      pendingUntil ?? null,
    ],
  );
  return row!.renamed;
}

/** A pending type change of a table's field (`pending_type_change`), as a write checks it. */
export interface PendingTypeChange {
  id: string;
  fieldId: string;
  toType: string;
  toOptions: JsonObject;
  /** The field is being made required (migrations/required-marks.ts), not converted. */
  required: boolean;
}

/**
 * The live pending type changes of a table's fields (`write_gate` answered `pending`), but for
 * required marks a change making the field optional lifted.
 */
export async function pendingTypeChanges(
  em: EntityManager,
  tableId: bigint,
): Promise<PendingTypeChange[]> {
  const rows = await query<{
    id: string;
    field_id: string;
    to_type: string;
    to_options: JsonObject;
    required: boolean;
  }>(
    em,
    `select id, field_id, to_type, to_options, required from pending_type_change
     where table_id = $1 and expires_at > now() and lifted_by is null order by id`,
    [tableId],
  );
  return rows.map((row) => ({
    id: row.id,
    fieldId: row.field_id,
    toType: row.to_type,
    toOptions: row.to_options,
    required: row.required,
  }));
}

/** A field and the type and options it is changed to. */
export interface PendingTarget {
  tableId: bigint;
  fieldId: bigint;
  toType: string;
  toOptions: Readonly<JsonObject> | undefined;
}

/** What a mark holds writes to: the change's type and options, or the field being required. */
export type MarkKind = "converts" | "required";

/**
 * Marks a type change of a field as pending for `seconds` (CheckFieldTypeChange, before it reads
 * the values), under the table's exclusive lock: every write that took the table's shared lock
 * before has committed when this commits, and every later one finds the mark (`write_gate`).
 * The mark carries the `changeId` catalog gave the check (migrations/change-ids.ts). The table's
 * long-expired marks go with it (`dropTypeChangeMarks`). Returns the mark's id.
 */
export async function markTypeChangePending(
  em: EntityManager,
  change: PendingTarget,
  seconds: number,
  kind: MarkKind = "converts",
  changeId = "",
): Promise<string> {
  await dropTypeChangeMarks(em, change.tableId, []);
  const [row] = await query<{ id: string }>(
    em,
    `insert into pending_type_change
       (table_id, field_id, to_type, to_options, expires_at, required, change_id)
     values ($1, $2, $3, $4::jsonb, now() + make_interval(secs => $5), $6, nullif($7, ''))
     returning id`,
    [
      change.tableId,
      change.fieldId,
      change.toType,
      JSON.stringify(change.toOptions ?? {}),
      seconds,
      kind === "required",
      changeId,
    ],
  );
  return row!.id;
}

/**
 * How long an expired mark is kept (as a PostgreSQL interval): it holds no write any more, but
 * its change's event, however late (the CATALOG stream keeps events 7 days), still finds when it
 * stopped being pending (`ClearedChange.pendingUntil`), so that a late rename leaves alone the
 * records written since, whatever other checks of the table came in between.
 */
const EXPIRED_MARK_KEPT = "7 days";

/**
 * Removes the table's marks of a change that will not be applied (the check refused it or
 * failed, or catalog did not commit it): those `ids` and those of `changeId`, and the table's
 * marks expired more than EXPIRED_MARK_KEPT ago, in the caller's transaction; the required marks `changeId` lifted hold writes
 * again. Under the table's exclusive lock, as every deletion of a mark: a write noting its
 * records under a mark holds the shared one, so no note names a mark that is gone, and a mark's
 * notes go with it (migrations/pending-writes.ts). Ids already gone, or of another table, are
 * left alone.
 */
export async function dropTypeChangeMarks(
  em: EntityManager,
  tableId: bigint,
  ids: readonly string[],
  changeId = "",
): Promise<void> {
  await lockTableExclusive(em, tableId);
  await query(
    em,
    `delete from pending_type_change
     where table_id = $1
       and (id = any($2::bigint[]) or change_id = nullif($3, '')
         or expires_at <= now() - interval '${EXPIRED_MARK_KEPT}')`,
    [tableId, ids, changeId],
  );
  if (changeId) {
    await query(
      em,
      "update pending_type_change set lifted_by = null where table_id = $1 and lifted_by = $2",
      [tableId, changeId],
    );
  }
}

/**
 * Lets writes leave a field made optional again empty, at once (its check, under the table's
 * exclusive lock, in the caller's transaction): its required marks are lifted by `changeId`,
 * whose release makes them hold writes again (migrations/change-ids.ts); without a change id
 * (catalogs older than it), they are removed.
 */
export async function liftRequiredMarks(
  em: EntityManager,
  tableId: bigint,
  fieldId: bigint,
  changeId: string,
): Promise<void> {
  await lockTableExclusive(em, tableId);
  await query(
    em,
    changeId
      ? "update pending_type_change set lifted_by = $3 where table_id = $1 and field_id = $2 and required"
      : "delete from pending_type_change where table_id = $1 and field_id = $2 and required",
    changeId ? [tableId, fieldId, changeId] : [tableId, fieldId],
  );
}

/** A record a write noted under a pending change, and whether it held the field as changed. */
export interface NotedWrite {
  rowId: string;
  /** The last write that noted it held the field as the change makes it (its schema the new). */
  asChanged: boolean;
}

/**
 * Removes the pending marks of a field's change to `to`, applied, in a transaction that holds the
 * table's exclusive lock: those of its `changeId`, which its event carries; returns the records
 * that writes noted under them (`notePendingWrites`), which the conversion may have passed
 * before they were written.
 */
export async function clearTypeChangePending(
  em: EntityManager,
  change: PendingTarget,
  changeId: string,
): Promise<ClearedChange> {
  // An event of a catalog older than change ids, whose check left marks without one: the marks
  // of this change only, its check's (made more than once when a check was tried again), not
  // those of the same change made again later (decimals 2 -> 0, back to 2, to 0 again), whose
  // own check must hold writes until its own event is applied. Changes of a field are checked
  // and applied in order, so the marks equal to this change that come before the first later
  // mark of another change are this change's; the rest are a later one's.
  const equalBeforeOther = `
    with equal as (
      select id from pending_type_change
      where table_id = $1 and field_id = $2 and not required and change_id is null
        and to_type = $3 and to_options = $4::jsonb
    ), later_other as (
      select min(id) as id from pending_type_change
      where table_id = $1 and field_id = $2 and not required and change_id is null
        and not (to_type = $3 and to_options = $4::jsonb)
        and id > (select min(id) from equal)
    )
    select id from equal
    where id < coalesce((select id from later_other), 9223372036854775807)`;
  // The statement reads the notes as they were before it, their marks' deletion takes them.
  const [row] = await query<{ until_us: string | null; writes: { r: string; c: boolean }[] }>(
    em,
    `with mine as (${
      changeId
        ? `select id from pending_type_change
           where table_id = $1 and field_id = $2 and not required and change_id = $3`
        : equalBeforeOther
    }), gone as (
       delete from pending_type_change where id in (select id from mine) returning id, expires_at
     ), noted as (
       select w.row_id, bool_and(w.as_changed) as as_changed
       from pending_type_change_write w join gone on gone.id = w.mark_id
       group by w.row_id
     )
     select (select (extract(epoch from max(expires_at)) * 1000000)::bigint::text from gone)
         as until_us,
       coalesce((select json_agg(json_build_object('r', row_id::text, 'c', as_changed)
         order by row_id) from noted), '[]') as writes`,
    changeId
      ? [change.tableId, change.fieldId, changeId]
      : [change.tableId, change.fieldId, change.toType, JSON.stringify(change.toOptions ?? {})],
  );
  return {
    writes: row!.writes.map((write) => ({ rowId: write.r, asChanged: write.c })),
    pendingUntil: row!.until_us ?? undefined,
  };
}

/** What `clearTypeChangePending` found of a change it cleared. */
export interface ClearedChange {
  /** The records writes noted while the change was pending. */
  writes: NotedWrite[];
  /**
   * When its marks stopped holding writes (epoch microseconds), undefined when it had none
   * left: a write after that was not noted, and held the field as changed (PENDING_SECONDS).
   */
  pendingUntil: string | undefined;
}

/** A pending mark a write's values were checked against, as the write notes its records. */
export interface CheckedMark {
  id: string;
  /** The write held the field as the change makes it (its schema already the new one). */
  asChanged: boolean;
}

/**
 * Notes the records `rowIds` a write changed after checking its values against the pending
 * marks `marks` (those of the fields it sets), in the write's transaction and under the table's
 * shared lock (migrations/pending-writes.ts); a later write of a record notes it again, over
 * the earlier note (migrations/pending-writes-as-changed.ts). Marks gone since the write read
 * them are skipped: the write's gate found none of its fields' live marks unchecked.
 */
export async function notePendingWrites(
  em: EntityManager,
  tableId: bigint,
  marks: readonly CheckedMark[],
  rowIds: readonly bigint[],
): Promise<void> {
  if (marks.length === 0 || rowIds.length === 0) return;
  await query(
    em,
    `insert into pending_type_change_write (mark_id, row_id, as_changed)
     select distinct m.id, r.row_id, c.as_changed
     from unnest($2::bigint[], $3::boolean[]) as c(id, as_changed)
     join pending_type_change m on m.id = c.id and m.table_id = $1
     cross join unnest($4::bigint[]) as r(row_id)
     on conflict (mark_id, row_id) do update set as_changed = excluded.as_changed`,
    [tableId, marks.map((mark) => mark.id), marks.map((mark) => mark.asChanged), rowIds],
  );
}

/**
 * Marks a deleted field deleted, under the table's exclusive lock: a write that took the table's
 * shared lock before has committed, and every later one finds the mark (`write_gate` answers
 * `stale`; a write whose schema still has the field reads it again), so from the commit on no
 * write gives the field a value. Its stored values are then dropped by `sweepDeletedField`.
 */
export async function markFieldDeleted(
  em: EntityManager,
  tableId: bigint,
  fieldId: bigint,
): Promise<void> {
  await lockTableExclusive(em, tableId);
  await query(
    em,
    "insert into deleted_field (table_id, field_id) values ($1, $2) on conflict do nothing",
    [tableId, fieldId],
  );
}

/**
 * Drops a deleted field's values from the table's records, `chunk` records per statement, each
 * committed on its own (call it outside a transaction) and without the table's lock: as one
 * statement under the lock, a million records held every write to the table for seconds. Only
 * after `markFieldDeleted` committed: no write adds a value then, and one that carries the old
 * data of a record not swept yet along (a patch) is swept after it, either by a later chunk or,
 * when its record's chunk waits for it, by the chunk itself, which checks the record again once
 * the patch commits. A chunk locks its records in row_id order, as writes do, so they never
 * deadlock; the records without a value are only read, once. Returns how many held one.
 */
export async function sweepDeletedField(
  em: EntityManager,
  tableId: bigint,
  fieldId: bigint,
  chunk = RECORD_CHUNK,
): Promise<number> {
  if (!(await recordKept(em))) return 0;
  return inChunks(
    em,
    `with chunk as materialized (
       select row_id from record where table_id = $1 and row_id > $3 and data ? $2::text
       order by row_id limit $4 for update
     ), changed as (
       update record r set data = r.data - $2::text
       from chunk where r.table_id = $1 and r.row_id = chunk.row_id
       returning 1
     )
     ${CHUNK_RESULT}`,
    (after) => [tableId, fieldId.toString(), after, chunk],
    (swept) => swept === chunk,
  );
}

/**
 * Marks the tables deleted, under each table's exclusive lock (in id order): a create that got in
 * before has committed, and every later one finds the mark (`create_gate`'s `gone`).
 */
export async function markTablesDeleted(
  em: EntityManager,
  tableIds: readonly bigint[],
): Promise<void> {
  const sorted = [...tableIds].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  for (const tableId of sorted) await lockTableExclusive(em, tableId);
  await query(
    em,
    "insert into deleted_table (table_id) select unnest($1::bigint[]) on conflict do nothing",
    [sorted],
  );
}

/**
 * Marks the organization deleted, under its exclusive lock: a create that got in before has
 * committed, and every later one finds the mark (`create_gate`'s `gone`).
 */
export async function markOrganizationGone(
  em: EntityManager,
  organizationId: bigint,
): Promise<void> {
  await lockOrganizationExclusive(em, organizationId);
  await query(
    em,
    "insert into deleted_organization (organization_id) values ($1) on conflict do nothing",
    [organizationId],
  );
}

/**
 * Whether the jsonb storage's `record` is still there: the upgrade drops it once every table has
 * moved out (src/upgrade.ts), and the deletions below then find no record of a table there.
 */
export async function recordKept(em: EntityManager): Promise<boolean> {
  const [row] = await query<{ kept: boolean }>(
    em,
    "select to_regclass('record') is not null as kept",
  );
  return row?.kept === true;
}

/** The tables the organization has records in, in `record`. */
export async function tablesWithRecords(
  em: EntityManager,
  organizationId: bigint,
): Promise<bigint[]> {
  if (!(await recordKept(em))) return [];
  const rows = await query<{ table_id: string }>(
    em,
    "select distinct table_id from record where organization_id = $1 order by table_id",
    [organizationId],
  );
  return rows.map((row) => BigInt(row.table_id));
}

/**
 * Deletes a table's records, `chunk` per statement, each committed on its own (call it outside a
 * transaction, once the table or its organization is marked deleted: no create adds a record
 * then), and gives their count back to the organization's usage. As one statement, a table of a
 * million records kept a transaction open for seconds, and the consumer's later events waited
 * for it. What is left (nothing, unless a chunk failed) goes with the deletion's transaction.
 * Returns how many it deleted.
 */
export async function deleteRecordsInChunks(
  em: EntityManager,
  tableId: bigint,
  chunk = RECORD_CHUNK,
): Promise<number> {
  if (!(await recordKept(em))) return 0;
  return inChunks(
    em,
    `with chunk as materialized (
       select row_id from record where table_id = $1 and row_id > $2
       order by row_id limit $3 for update
     ), changed as (
       delete from record r using chunk where r.table_id = $1 and r.row_id = chunk.row_id
       returning r.organization_id
     ), released as materialized (
       select record_usage_add(organization_id, -count(*)) from changed group by organization_id
     )
     -- A CTE that writes nothing runs only when read: the organizations column reads it.
     ${CHUNK_RESULT}, (select count(*) from released) as organizations`,
    (after) => [tableId, after, chunk],
    (deleted) => deleted === chunk,
  );
}

/**
 * Deletes every record of the tables in `record` and gives their count back to each
 * organization's usage; their rows of `record_count` (of either storage), counters, change logs
 * and marks go too. Returns how many it deleted from `record`.
 */
export async function deleteTablesRecords(
  em: EntityManager,
  tableIds: readonly bigint[],
): Promise<number> {
  if (tableIds.length === 0) return 0;
  const rows = !(await recordKept(em))
    ? []
    : await query<{ deleted: string }>(
        em,
        `with gone as (
           delete from record where table_id = any($1::bigint[]) returning organization_id
         ), counted as (
           select organization_id, count(*) as n from gone group by organization_id
         ), released as materialized (
           select record_usage_add(organization_id, -n) from counted
         )
         -- A CTE that writes nothing runs only when read: the organizations column reads it.
         select coalesce(sum(n), 0) as deleted, (select count(*) from released) as organizations
         from counted`,
        [tableIds],
      );
  // Their counts (record_count), but for a row a writer holds: it counts nothing that can be
  // listed, and waiting on it could close a cycle with that writer.
  await query(
    em,
    `delete from record_count where id in (
       select id from record_count where table_id = any($1::bigint[]) for update skip locked
     )`,
    [tableIds],
  );
  await query(em, "delete from autonumber_counter where table_id = any($1::bigint[])", [tableIds]);
  await forgetChanges(em, tableIds);
  await query(em, "delete from deleted_field where table_id = any($1::bigint[])", [tableIds]);
  await query(em, "delete from pending_type_change where table_id = any($1::bigint[])", [tableIds]);
  return Number(rows[0]?.deleted ?? 0);
}

/**
 * Deletes every record of an organization and its usage (its row and its shares), and the
 * autonumber counters of the tables that hold records and of `tableIds` (those whose records
 * went before, in chunks); those of empty tables go with catalog's DatabaseDeleted
 * (`deleteTablesRecords`), which names every table. Returns how many records it deleted.
 */
export async function deleteOrganizationRecords(
  em: EntityManager,
  organizationId: bigint,
  tableIds: readonly bigint[] = [],
): Promise<number> {
  const kept = await recordKept(em);
  const withRecords = kept
    ? await query<{ table_id: string }>(
        em,
        "select distinct table_id::text from record where organization_id = $1",
        [organizationId],
      )
    : [];
  const tables = [...tableIds, ...withRecords.map((row) => BigInt(row.table_id))];
  await query(em, "delete from autonumber_counter where table_id = any($1::bigint[])", [tables]);
  await forgetChanges(em, tables);
  const rows = kept
    ? await query<{ deleted: string }>(
        em,
        `with gone as (delete from record where organization_id = $1 returning 1)
         select count(*) as deleted from gone`,
        [organizationId],
      )
    : [];
  await query(
    em,
    `with shares as (delete from organization_usage_share where organization_id = $1)
     delete from organization_usage where organization_id = $1`,
    [organizationId],
  );
  return Number(rows[0]?.deleted ?? 0);
}

/**
 * Deletes the change logs of deleted tables (docs/changes.md): no route can read them any more,
 * and retention would keep them for days.
 */
export async function forgetChanges(em: EntityManager, tableIds: readonly bigint[]): Promise<void> {
  if (tableIds.length === 0) return;
  await query(em, "delete from record_change_write where table_id = any($1::bigint[])", [tableIds]);
  await query(em, "delete from record_change_trim where table_id = any($1::bigint[])", [tableIds]);
}

/** Whether a consumer has not applied an event yet (without marking it). */
export async function notProcessed(
  em: EntityManager,
  consumer: string,
  eventId: string,
): Promise<boolean> {
  const rows = await query(
    em,
    "select 1 from processed_event where consumer = $1 and event_id = $2",
    [consumer, eventId],
  );
  return rows.length === 0;
}
