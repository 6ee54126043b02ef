import type { EntityManager } from "@mikro-orm/postgresql";

/** What a deletion event removes the files of; the mark of a carried-out deletion. */
export type ScopeKind = "organization" | "table" | "field" | "row";

export interface Scope {
  kind: ScopeKind;
  id: bigint;
}

function lockKey(kind: string, id: string): string {
  return `files.${kind}:${id}`;
}

/**
 * Taken shared by every write that adds a file, for each scope the file is in (organization,
 * table, field, row, in that order), and exclusively by the deletion of one scope: a write either
 * commits before the deletion looks for files, or runs after it and finds the deletion mark.
 */
export async function lockScopesShared(em: EntityManager, scopes: Scope[]): Promise<void> {
  for (const scope of scopes) {
    await em.execute("select pg_advisory_xact_lock_shared(hashtextextended(?, 0))", [
      lockKey(scope.kind, scope.id.toString()),
    ]);
  }
}

/**
 * Exclusive locks on scopes of one kind (a database's tables, a batch of deleted rows), taken in
 * one statement in ascending id order, so that two deletions never wait on each other in a cycle.
 */
export async function lockScopesExclusive(
  em: EntityManager,
  kind: ScopeKind,
  ids: bigint[],
): Promise<void> {
  const sorted = [...new Set(ids)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  if (sorted.length === 0) return;
  await em.execute(
    `select count(pg_advisory_xact_lock(hashtextextended(k, 0)))
     from (select ? || id::text as k, id from unnest(array[?]::bigint[]) as id order by id) as s`,
    [`files.${kind}:`, sorted.map(String)],
  );
}

/** Marks scopes deleted (idempotent). */
export async function markDeleted(
  em: EntityManager,
  kind: ScopeKind,
  ids: bigint[],
): Promise<void> {
  if (ids.length === 0) return;
  await em.execute(
    "insert into deleted_scope (kind, id) select ?, unnest(array[?]::bigint[]) on conflict do nothing",
    [kind, ids.map(String)],
  );
}

/** The first of the scopes whose deletion has been carried out, if any. */
export async function deletedScopeOf(
  em: EntityManager,
  scopes: Scope[],
): Promise<ScopeKind | undefined> {
  if (scopes.length === 0) return undefined;
  const rows = await em.execute<{ kind: ScopeKind }[]>(
    `select kind from deleted_scope
     where (kind, id) in (select * from unnest(array[?]::text[], array[?]::bigint[]))`,
    [scopes.map((s) => s.kind), scopes.map((s) => s.id.toString())],
  );
  const deleted = new Set(rows.map((r) => r.kind));
  return scopes.find((s) => deleted.has(s.kind))?.kind;
}

/**
 * Serialises every change of one pair's files (upload, rename, delete, restore) until the
 * transaction ends, so that two uploads to one pair cannot both replace the same live file.
 */
export async function lockPair(em: EntityManager, rowId: bigint, fieldId: bigint): Promise<void> {
  await em.execute("select pg_advisory_xact_lock(hashtextextended(?, 0))", [
    lockKey("pair", `${rowId}:${fieldId}`),
  ]);
}
