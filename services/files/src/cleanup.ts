import type { EntityManager } from "@mikro-orm/postgresql";
import type { CallContext, Transactions, Within } from "./change-set.js";
import { lockScopesExclusive, markDeleted, type ScopeKind } from "./db/scopes.js";
import { releaseUsage } from "./stored-file.js";

const COLUMN: Record<Exclude<ScopeKind, "row">, string> = {
  organization: "organization_id",
  table: "table_id",
  field: "field_id",
};

const NOTHING: Within<number> = { result: 0, afterCommit: () => {} };

/**
 * Files' part of the deletion sagas. Each step marks what was deleted (so an upload racing it is
 * refused at commit), removes or soft-deletes the rows in one transaction with the usage, and
 * queues the bytes for the collector. Each runs in the caller's transaction `em` (the event
 * consumer's, which records the event id with it) and returns what to do once it has committed:
 * the bytes are handed to the collector only then. Every step is idempotent besides: a replayed
 * event finds nothing left and changes nothing.
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
      const released = await em.execute<
        { organization_id: string; size: string; storage_key: string }[]
      >(
        `delete from file where ${COLUMN[kind]} in (?)
         returning organization_id, size, storage_key`,
        [ids],
      );
      await releaseUsage(em, released);
      if (kind === "organization") {
        await em.execute("delete from storage_usage where organization_id in (?)", [ids]);
      }
      await changes.releaseBlobs(released.map((row) => row.storage_key));
      return released.length;
    });
  }

  /**
   * Soft-deletes the live files of deleted records (records.deleted): they are purged with their
   * bytes 30 days later like any deleted file, and no upload can reach those rows any more.
   * Returns how many files were live.
   */
  async softDeleteRows(
    em: EntityManager,
    context: CallContext,
    rowIds: bigint[],
  ): Promise<Within<number>> {
    if (rowIds.length === 0) return NOTHING;
    return this.tx.within(em, context, async (changes) => {
      const { em } = changes;
      await lockScopesExclusive(em, "row", rowIds);
      await markDeleted(em, "row", rowIds);
      const rows = await em.execute(
        `update file
         set deleted_at = now(), updated_at = now(), url_generation = url_generation + 1
         where row_id in (?) and deleted_at is null
         returning id`,
        [rowIds],
      );
      return rows.length;
    });
  }
}
