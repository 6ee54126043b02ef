import type { Logger, Orm } from "@rowbase/kit";
import type { Transactions } from "./change-set.js";
import { RETENTION_DAYS, releaseUsage } from "./db/stored-file.js";
import type { BlobStore } from "./storage/index.js";

export interface MaintenanceOptions {
  /** Between two rounds of purging and collecting. */
  intervalMs?: number;
  batchSize?: number;
}

/** How long deletion marks stay: longer than any upload takes. */
const DELETION_MARK_HOURS = 24;

/**
 * The scheduled work of the files service, run by every replica side by side: purge files
 * deleted more than 30 days ago (rows and usage in one transaction, bytes queued), delete queued
 * bytes, drop old deletion marks, and (hourly) the store's leftovers of interrupted writes. Rows are claimed with `for update skip locked`, so replicas
 * never work on the same file twice, and a failure leaves the work for the next round.
 */
export class Maintenance {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  private readonly intervalMs: number;
  private readonly batchSize: number;
  private lastSweep = 0;

  constructor(
    private readonly orm: Orm,
    private readonly tx: Transactions,
    private readonly blobs: BlobStore,
    private readonly logger: Logger,
    options: MaintenanceOptions = {},
  ) {
    this.intervalMs = options.intervalMs ?? 60_000;
    this.batchSize = options.batchSize ?? 100;
  }

  start(): void {
    this.stopped = false;
    this.timer = setInterval(() => this.kick(), this.intervalMs);
    this.timer.unref();
    this.kick();
  }

  /** Runs a round soon (after a commit that released bytes). */
  kick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.runOnce()
      .then(() => undefined)
      .catch((error: unknown) => this.logger.warn({ err: error }, "files maintenance round failed"))
      .finally(() => {
        this.running = undefined;
        if (this.again) {
          this.again = false;
          this.kick();
        }
      });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.running;
  }

  /** One full round; returns what it did (tests and operators call it directly). */
  async runOnce(): Promise<{ purged: number; collected: number }> {
    let purged = 0;
    for (;;) {
      const n = await this.purgeBatch();
      purged += n;
      if (n < this.batchSize) break;
    }
    let collected = 0;
    for (;;) {
      const { done, claimed } = await this.collectBatch();
      collected += done;
      if (claimed < this.batchSize) break;
    }
    await this.orm.em
      .fork()
      .execute(
        `delete from deleted_scope where deleted_at < now() - interval '${DELETION_MARK_HOURS} hours'`,
      );
    if (this.blobs.sweep && Date.now() - this.lastSweep > 3600_000) {
      this.lastSweep = Date.now();
      await this.blobs.sweep();
    }
    if (purged > 0 || collected > 0) {
      this.logger.info({ purged, collected }, "files maintenance");
    }
    return { purged, collected };
  }

  /** Removes up to one batch of files deleted more than 30 days ago; their bytes are queued. */
  private async purgeBatch(): Promise<number> {
    return this.tx.run({ principal: undefined, requestId: "" }, async (changes) => {
      const { em } = changes;
      const released = await em.execute<
        { organization_id: string; size: string; storage_key: string }[]
      >(
        `with doomed as (
           select id from file
           where deleted_at is not null and deleted_at < now() - interval '${RETENTION_DAYS} days'
           order by deleted_at limit ? for update skip locked
         )
         delete from file f using doomed where f.id = doomed.id
         returning f.organization_id, f.size, f.storage_key`,
        [this.batchSize],
      );
      await releaseUsage(em, released);
      await changes.releaseBlobs(released.map((row) => row.storage_key));
      return released.length;
    });
  }

  /**
   * Deletes up to one batch of queued bytes that are due. A key whose deletion fails is tried
   * again later, waiting longer after each failure.
   */
  private async collectBatch(): Promise<{ done: number; claimed: number }> {
    return this.orm.em.fork().transactional(async (em) => {
      const due = await em.execute<{ storage_key: string; attempts: number }[]>(
        `select storage_key, attempts from blob_gc where due_at <= now()
         order by due_at limit ? for update skip locked`,
        [this.batchSize],
      );
      const done: string[] = [];
      for (const { storage_key: key, attempts } of due) {
        try {
          await this.blobs.delete(key);
          done.push(key);
        } catch (error) {
          this.logger.warn({ err: error, storage_key: key }, "could not delete file bytes");
          const backoffSeconds = Math.min(3600, 30 * 2 ** Math.min(attempts, 7));
          await em.execute(
            `update blob_gc set attempts = attempts + 1,
               due_at = now() + (? * interval '1 second') where storage_key = ?`,
            [backoffSeconds, key],
          );
        }
      }
      if (done.length > 0) {
        await em.execute("delete from blob_gc where storage_key in (?)", [done]);
      }
      return { done: done.length, claimed: due.length };
    });
  }
}
