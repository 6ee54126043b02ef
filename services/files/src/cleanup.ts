import type { EntityManager } from "@mikro-orm/postgresql";
import type { CallContext, Within } from "@rowbase/kit";
import type { ChangeSet, Transactions } from "./change-set.js";
import { lockScopesExclusive, markDeleted, type ScopeKind } from "./db/scopes.js";
import { releaseUsage } from "./db/stored-file.js";

const COLUMN: Record<Exclude<ScopeKind, "row">, string> = {
  organization: "organization_id",
  table: "table_id",
  field: "field_id",
};

const NOTHING: Within<number> = { result: 0, afterCommit: async () => {} };

/** How many files one transaction of `deleteScopesInChunks` deletes. */
export const SCOPE_DELETE_CHUNK = 1000;

/**
 * Files' part of the deletion sagas. Each step marks what was deleted (so an upload racing it is
 * refused at commit), removes the rows with their usage (a deleted scope's files first in
 * chunks, `deleteScopesInChunks`), and queues the bytes for the collector. Each runs in the
 * caller's transaction `em` (the event consumer's, which records the event id with it) and
 * returns what to do once it has committed: the bytes are handed to the collector only then.
 * Every step is idempotent besides: a replayed event finds nothing left and changes nothing.
 */
export class Cleanup {
  constructor(private readonly tx: Transactions) {}

  /**
   * Deletes for good every file (live or soft-deleted) of organizations, tables or fields, with
   * their bytes. Returns how many files went.
   */
  async deleteScopes(
    em: EntityManager,
    context: CallContext,
    kind: Exclude<ScopeKind, "row">,
    ids: bigint[],
  ): Promise<Within<number>> {
    if (ids.length === 0) return NOTHING;
    return this.tx.within(em, context, async (changes) => {
      const { em } = changes;
      await lockScopesExclusive(em, kind, ids);
      await markDeleted(em, kind, ids);
      const deleted = await removeFiles(changes, `${COLUMN[kind]} in (?)`, [ids]);
      if (kind === "organization") {
        await em.execute("delete from storage_usage where organization_id in (?)", [ids]);
      }
      return deleted;
    });
  }

  /**
   * Runs before `deleteScopes`, outside the consumer's transaction: marks the scopes deleted in
   * a short transaction under their locks, so that no file is added to them from then on, then
   * deletes their files `chunk` at a time, each chunk in a transaction of its own with its
   * usage and bytes. A large table's files so neither keep one transaction open for long nor
   * hold back the consumer's later events; `deleteScopes` then finds nothing left, unless a
   * chunk failed. A replay finds the mark and no files. Returns how many files went.
   */
  async deleteScopesInChunks(
    context: CallContext,
    kind: Exclude<ScopeKind, "row">,
    ids: bigint[],
    chunk = SCOPE_DELETE_CHUNK,
  ): Promise<number> {
    if (ids.length === 0) return 0;
    await this.tx.run(context, async ({ em }) => {
      await lockScopesExclusive(em, kind, ids);
      await markDeleted(em, kind, ids);
    });
    let total = 0;
    for (;;) {
      const deleted = await this.tx.run(context, (changes) =>
        removeFiles(changes, `id in (select id from file where ${COLUMN[kind]} in (?) limit ?)`, [
          ids,
          chunk,
        ]),
      );
      total += deleted;
      if (deleted < chunk) return total;
    }
  }

  /**
   * Deletes for good every file (live or soft-deleted) of deleted records (records.deleted),
   * with their usage and bytes, and closes the rows to uploads. A deleted record cannot come
   * back, so neither can its files: keeping them for the 30 days of a deleted file would only
   * keep them counting toward the plan's storage. Returns how many files went.
   */
  async deleteRows(
    em: EntityManager,
    context: CallContext,
    rowIds: bigint[],
  ): Promise<Within<number>> {
    if (rowIds.length === 0) return NOTHING;
    return this.tx.within(em, context, async (changes) => {
      await lockScopesExclusive(changes.em, "row", rowIds);
      await markDeleted(changes.em, "row", rowIds);
      return removeFiles(changes, "row_id in (?)", [rowIds]);
    });
  }
}

/**
 * Deletes for good the files `where` selects (over `params`), gives their bytes back to their
 * organizations' usage and queues the bytes for the collector. Returns how many went.
 */
async function removeFiles(changes: ChangeSet, where: string, params: unknown[]): Promise<number> {
  const released = await changes.em.execute<
    { organization_id: string; size: string; storage_key: string }[]
  >(`delete from file where ${where} returning organization_id, size, storage_key`, params);
  await releaseUsage(changes.em, released);
  await changes.releaseBlobs(released.map((row) => row.storage_key));
  return released.length;
}
