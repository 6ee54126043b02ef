import { setTimeout as sleep } from "node:timers/promises";
import type { Client } from "@connectrpc/connect";
import type { EntityManager } from "@mikro-orm/postgresql";
import {
  callAs,
  errorInfoOf,
  hasSqlState,
  type Logger,
  query,
  type TableSchema,
} from "@rowbase/kit";
import type { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import {
  deleteRecordsInChunks,
  deleteTablesRecords,
  markTablesDeleted,
  recordKept,
} from "./db/schema-changes.js";
import { addFieldSql, applyDdl } from "./db/user-tables/ddl.js";
import { MoveRefused, moveTable } from "./db/user-tables/move.js";
import type { TableSchemas } from "./table-schema.js";

/** How long the upgrade waits before it looks again when a round found nothing to do. */
const IDLE_MS = 30_000;

/** Table ids asked of catalog at a time (ListTableIds). */
const CATALOG_PAGE = 1000;

/** How long the drop waits for `record`'s lock before it leaves it for a later round. */
const DROP_LOCK_TIMEOUT_MS = 2_000;

export interface UpgradeDeps {
  /** Forked for every round. */
  em: EntityManager;
  /** The table's schema as catalog has it now; undefined when catalog says it does not exist. */
  schemaOf(tableId: bigint): Promise<TableSchema | undefined>;
  /** Up to `limit` ids of the tables catalog has, after `after`, ascending (ListTableIds). */
  tableIdsAfter(after: bigint, limit: number): Promise<bigint[]>;
  logger: Logger;
  idleMs?: number;
}

/**
 * `UpgradeDeps.schemaOf` from catalog: the schema as it is now (never a cached one, which could
 * miss a field added since), undefined when catalog answers table_not_found. Any other failure
 * (catalog unavailable) fails the round, which is tried again later.
 */
export function catalogSchemaOf(schemas: TableSchemas) {
  return async (tableId: bigint): Promise<TableSchema | undefined> => {
    try {
      return await schemas.fresh(tableId);
    } catch (error) {
      if (errorInfoOf(error)?.reason === "table_not_found") return undefined;
      throw error;
    }
  };
}

/** `UpgradeDeps.tableIdsAfter` from catalog (ListTableIds, as the records service). */
export function catalogTableIds(catalog: Client<typeof CatalogService>, internalSecret: string) {
  return async (after: bigint, limit: number): Promise<bigint[]> => {
    const call = await callAs(internalSecret, { kind: "service", service: "records" });
    return (await catalog.listTableIds({ afterTableId: after, limit }, call)).tableIds;
  };
}

/**
 * What one round did: `moved` a table's records into its own table, deleted those of a table
 * that is `gone` (catalog has no such table, or records marked it deleted), or left a table
 * whose move was `refused` (its records are not what its schema says: MoveRefused) or has to
 * `wait` for a type or options change to be applied; `registered` a table catalog has that had
 * no record in `record` (with the records a create put there meanwhile, if any); `idle`: no
 * table is left after the last one looked at (the next round starts from the first again);
 * `busy`: another replica runs the upgrade; `dropped`: every table is registered and `record`
 * held nothing, so this round dropped it, and the upgrade is finished; `done`: it was before.
 */
export type UpgradeRound =
  | { kind: "moved"; tableId: bigint; records: number; ms: number }
  | { kind: "registered"; tableId: bigint; records: number }
  | { kind: "dropped" }
  | { kind: "done" }
  | { kind: "gone"; tableId: bigint; records: number }
  | { kind: "refused"; tableId: bigint; reason: string }
  | { kind: "wait"; tableId: bigint }
  | { kind: "idle" }
  | { kind: "busy" };

/** A round of the pass over catalog's tables, with the schema of a table it registered. */
interface Registration {
  round: UpgradeRound;
  schema?: TableSchema;
}

/**
 * The upgrade in place: moves the tables still stored in `record` into tables of their own, one
 * table a round, while the service serves (each move holds only its own table's writes,
 * `moveTable`). One replica runs it at a time: a round holds a transaction-scoped advisory lock
 * that the others' rounds try for and, not getting it, leave. Tables are taken in id order from
 * `record`'s `(table_id, row_id)` index, past the one looked at last, so a table that has to
 * wait does not hold the others up.
 *
 * When `record` holds no row, the rounds go through catalog's tables (ListTableIds, a page at a
 * time) and register each one `user_table` does not name, a table a round, as the move of a
 * table with no records (`moveTable`: under the table's write lock, so that a create waiting
 * for it is sent to the user table, and one that came first is moved). A pass over catalog's
 * tables that finds every one registered ends the upgrade: `record` is dropped (`dropRecord`),
 * and the rounds stop, on every replica, for good.
 */
export class Upgrade {
  private after = 0n;
  /**
   * The pass over catalog's tables: where it is, whether it found a table not registered, and
   * whether it had to leave one for a later pass.
   */
  private pass = { after: 0n, found: false, left: false };
  private running?: Promise<void>;
  private stopping?: AbortController;

  constructor(private readonly deps: UpgradeDeps) {}

  /**
   * Runs rounds in the background, pausing when there is nothing to do, until stopped or the
   * upgrade is finished (`record` dropped).
   */
  start(): void {
    if (this.running) return;
    const stopping = new AbortController();
    this.stopping = stopping;
    this.running = this.loop(stopping.signal);
  }

  /** Stops after the round under way (whose move then commits or rolls back whole). */
  async stop(): Promise<void> {
    this.stopping?.abort();
    await this.running;
    this.running = undefined;
  }

  private async loop(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      let round: UpgradeRound | undefined;
      try {
        round = await this.runOnce();
      } catch (error) {
        this.deps.logger.error({ err: error }, "upgrade: a round failed");
      }
      if (round?.kind === "dropped" || round?.kind === "done") return;
      if (round && round.kind !== "idle" && round.kind !== "busy") continue;
      await sleep(this.deps.idleMs ?? IDLE_MS, undefined, { signal }).catch(() => undefined);
    }
  }

  /**
   * One round: the next table still stored in `record`, moved or deleted; when `record` holds
   * no row, the next table of catalog's not registered yet, or the drop of `record`.
   */
  async runOnce(): Promise<UpgradeRound> {
    let movedWith: TableSchema | undefined;
    const round = await this.deps.em.fork().transactional(async (tx): Promise<UpgradeRound> => {
      const [lock] = await query<{ mine: boolean }>(
        tx,
        "select pg_try_advisory_xact_lock(hashtextextended('records.upgrade', 0)) as mine",
      );
      if (!lock?.mine) return { kind: "busy" };
      if (!(await recordKept(tx))) return { kind: "done" };
      const [next] = await query<{ table_id: string }>(
        tx,
        "select table_id::text from record where table_id > $1 order by table_id limit 1",
        [this.after],
      );
      if (!next && this.after > 0n) {
        this.after = 0n;
        return { kind: "idle" };
      }
      if (!next) {
        const registered = await this.registerNext(tx);
        movedWith = registered.schema;
        return registered.round;
      }
      const tableId = BigInt(next.table_id);
      this.after = tableId;
      const schema = await this.deps.schemaOf(tableId);
      if (!schema) return this.deleteGone(tx, tableId);
      const started = performance.now();
      try {
        const moved = await moveTable(tx, {
          organizationId: schema.organizationId,
          tableId,
          fields: schema.fields,
        });
        switch (moved.outcome) {
          case "deleted":
            return this.deleteGone(tx, tableId);
          case "pending":
            this.deps.logger.info(
              { table_id: tableId.toString() },
              "upgrade: table waits for a change of its values",
            );
            return { kind: "wait", tableId };
          case "registered": {
            // Rows inserted after the move by a writer past the checks: none of the service's
            // statements can (record_count_change refuses them), so it is left for a person.
            const reason = "the table is moved, yet has rows in record";
            this.deps.logger.error(
              { table_id: tableId.toString(), reason },
              "upgrade: table not moved",
            );
            return { kind: "refused", tableId, reason };
          }
          case "moved": {
            movedWith = schema;
            const ms = Math.round(performance.now() - started);
            this.deps.logger.info(
              { table_id: tableId.toString(), records: moved.records, ms },
              "upgrade: table moved into its own table",
            );
            return { kind: "moved", tableId, records: moved.records, ms };
          }
        }
      } catch (error) {
        if (!(error instanceof MoveRefused)) throw error;
        this.deps.logger.error(
          { table_id: tableId.toString(), reason: error.message },
          "upgrade: table not moved",
        );
        return { kind: "refused", tableId, reason: error.message };
      }
    });
    if (movedWith) await this.addFieldsAddedMeanwhile(movedWith);
    return round;
  }

  /**
   * The next table of catalog's that `user_table` does not name, registered (the move of a table
   * without records); at the end of a pass that found none, the drop of `record`. A pass that
   * registered every table it found is followed by another at once, one that had to leave a
   * table (a change of its values pending, or its move refused) ends the round idle.
   */
  private async registerNext(tx: EntityManager): Promise<Registration> {
    for (;;) {
      const ids = await this.deps.tableIdsAfter(this.pass.after, CATALOG_PAGE);
      if (ids.length > 0) {
        const [first] = await query<{ table_id: string }>(
          tx,
          `select id::text as table_id from unnest($1::bigint[]) id
           where not exists (select from user_table u where u.table_id = id)
           order by id limit 1`,
          [ids],
        );
        if (!first) {
          this.pass.after = ids.at(-1)!;
          continue;
        }
        const tableId = BigInt(first.table_id);
        this.pass.after = tableId;
        this.pass.found = true;
        const registered = await this.registerEmpty(tx, tableId);
        if (registered.round.kind === "wait" || registered.round.kind === "refused") {
          this.pass.left = true;
        }
        return registered;
      }
      const { found, left } = this.pass;
      this.pass = { after: 0n, found: false, left: false };
      if (left) return { round: { kind: "idle" } };
      if (!found) return { round: await this.dropRecord(tx) };
    }
  }

  /** Registers a table catalog has and `record` had no row of, by the move of its records. */
  private async registerEmpty(tx: EntityManager, tableId: bigint): Promise<Registration> {
    const schema = await this.deps.schemaOf(tableId);
    // Deleted since catalog listed it: nothing is stored, its TableDeleted does the rest.
    if (!schema) return { round: { kind: "gone", tableId, records: 0 } };
    try {
      const moved = await moveTable(tx, {
        organizationId: schema.organizationId,
        tableId,
        fields: schema.fields,
      });
      switch (moved.outcome) {
        case "deleted":
          return { round: await this.deleteGone(tx, tableId) };
        case "pending":
          return { round: { kind: "wait", tableId } };
        case "registered":
          // Registered meanwhile (a TableCreated delivered again registers a table `record`
          // holds nothing of).
          return { round: { kind: "registered", tableId, records: 0 } };
        case "moved":
          this.deps.logger.info(
            { table_id: tableId.toString(), records: moved.records },
            "upgrade: table without records registered",
          );
          return { schema, round: { kind: "registered", tableId, records: moved.records } };
      }
    } catch (error) {
      if (!(error instanceof MoveRefused)) throw error;
      this.deps.logger.error(
        { table_id: tableId.toString(), reason: error.message },
        "upgrade: table not registered",
      );
      return { round: { kind: "refused", tableId, reason: error.message } };
    }
  }

  /**
   * Drops `record` once it holds no row and every table of catalog's is registered (the pass
   * before, in this transaction): under its lock, taken with a short timeout (a read of it
   * finishes first; a round that does not get the lock leaves it for a later one), and checked
   * empty again under it, since a create of a table still stored there could have added a row
   * meanwhile. The row ids' sequence is kept (migrations/row-id-sequence.ts); `record`'s
   * triggers go with it, and their function (sql/record_count_change.sql). From the commit on,
   * no replica's upgrade runs a round, and nothing reads or writes `record` (`StoredTables`).
   */
  private async dropRecord(tx: EntityManager): Promise<UpgradeRound> {
    try {
      const dropped = await tx.transactional(async (inner) => {
        await query(inner, "select set_config('lock_timeout', $1, true)", [
          String(DROP_LOCK_TIMEOUT_MS),
        ]);
        await query(inner, "lock table record in access exclusive mode");
        const [left] = await query<{ any: boolean }>(
          inner,
          "select exists (select from record) as any",
        );
        if (left?.any) return false;
        await query(inner, "alter sequence row_id_seq owned by none");
        await query(inner, "drop table record");
        await query(inner, "drop function if exists record_count_change()");
        return true;
      });
      if (!dropped) return { kind: "idle" };
    } catch (error) {
      if (!hasSqlState(error, "55P03")) throw error;
      this.deps.logger.info("upgrade: record is in use; its drop is left for a later round");
      return { kind: "idle" };
    }
    this.deps.logger.info("upgrade: every table is in its own table; record dropped");
    return { kind: "dropped" };
  }

  /**
   * The columns of fields catalog added while the table moved, after the move committed: the
   * move made its table from the schema read before it, and a field added then was not the
   * user table's to add (the table was not registered yet). From the registration on, catalog's
   * changes reach the user table themselves.
   */
  private async addFieldsAddedMeanwhile(moved: TableSchema): Promise<void> {
    const now = await this.deps.schemaOf(moved.tableId);
    if (!now) return;
    const had = new Set(moved.fields.map((field) => field.id));
    const added = now.fields.filter((field) => !had.has(field.id));
    const ddl = added.flatMap((field) =>
      addFieldSql(moved.organizationId, moved.tableId, { ...field, id: BigInt(field.id) }),
    );
    if (ddl.length === 0) return;
    await applyDdl(this.deps.em.fork(), ddl);
    this.deps.logger.warn(
      { table_id: moved.tableId.toString(), fields: added.map((field) => field.id) },
      "upgrade: columns added for fields created while the table moved",
    );
  }

  /**
   * A table catalog no longer has: deleted as its TableDeleted event deletes it (marked deleted
   * under its lock, so that no create adds a record meanwhile; its records given back to the
   * organization's usage, a chunk per statement; its count and marks), in case the event's
   * deletion never finished.
   */
  private async deleteGone(tx: EntityManager, tableId: bigint): Promise<UpgradeRound> {
    await markTablesDeleted(tx, [tableId]);
    let records = await deleteRecordsInChunks(tx, tableId);
    records += await deleteTablesRecords(tx, [tableId]);
    this.deps.logger.info(
      { table_id: tableId.toString(), records },
      "upgrade: records of a deleted table removed",
    );
    return { kind: "gone", tableId, records };
  }
}
