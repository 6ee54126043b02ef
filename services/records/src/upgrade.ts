import { setTimeout as sleep } from "node:timers/promises";
import type { EntityManager } from "@mikro-orm/postgresql";
import { errorInfoOf, type Logger, query, type TableSchema } from "@rowbase/kit";
import {
  deleteRecordsInChunks,
  deleteTablesRecords,
  markTablesDeleted,
} from "./db/schema-changes.js";
import { addFieldSql, applyDdl } from "./db/user-tables/ddl.js";
import { MoveRefused, moveTable } from "./db/user-tables/move.js";
import type { TableSchemas } from "./table-schema.js";

/** How long the upgrade waits before it looks again when a round found nothing to do. */
const IDLE_MS = 30_000;

export interface UpgradeDeps {
  /** Forked for every round. */
  em: EntityManager;
  /** The table's schema as catalog has it now; undefined when catalog says it does not exist. */
  schemaOf(tableId: bigint): Promise<TableSchema | undefined>;
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

/**
 * What one round did: `moved` a table's records into its own table, deleted those of a table
 * that is `gone` (catalog has no such table, or records marked it deleted), or left a table
 * whose move was `refused` (its records are not what its schema says: MoveRefused) or has to
 * `wait` for a type or options change to be applied; `idle`: no table is left after the last
 * one looked at (the next round starts from the first again); `busy`: another replica runs the
 * upgrade.
 */
export type UpgradeRound =
  | { kind: "moved"; tableId: bigint; records: number; ms: number }
  | { kind: "gone"; tableId: bigint; records: number }
  | { kind: "refused"; tableId: bigint; reason: string }
  | { kind: "wait"; tableId: bigint }
  | { kind: "idle" }
  | { kind: "busy" };

/**
 * The upgrade in place: moves the tables still stored in `record` into tables of their own, one
 * table a round, while the service serves (each move holds only its own table's writes,
 * `moveTable`). One replica runs it at a time: a round holds a transaction-scoped advisory lock
 * that the others' rounds try for and, not getting it, leave. Tables are taken in id order from
 * `record`'s `(table_id, row_id)` index, past the one looked at last, so a table that has to
 * wait does not hold the others up.
 */
export class Upgrade {
  private after = 0n;
  private running?: Promise<void>;
  private stopping?: AbortController;

  constructor(private readonly deps: UpgradeDeps) {}

  /** Runs rounds in the background until stopped, pausing when there is nothing to do. */
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
      if (round && round.kind !== "idle" && round.kind !== "busy") continue;
      await sleep(this.deps.idleMs ?? IDLE_MS, undefined, { signal }).catch(() => undefined);
    }
  }

  /** One round: the next table still stored in `record`, moved or deleted. */
  async runOnce(): Promise<UpgradeRound> {
    let movedWith: TableSchema | undefined;
    const round = await this.deps.em.fork().transactional(async (tx): Promise<UpgradeRound> => {
      const [lock] = await query<{ mine: boolean }>(
        tx,
        "select pg_try_advisory_xact_lock(hashtextextended('records.upgrade', 0)) as mine",
      );
      if (!lock?.mine) return { kind: "busy" };
      const [next] = await query<{ table_id: string }>(
        tx,
        "select table_id::text from record where table_id > $1 order by table_id limit 1",
        [this.after],
      );
      if (!next) {
        this.after = 0n;
        return { kind: "idle" };
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
