import type { EntityManager } from "@mikro-orm/postgresql";
import {
  type BusMessage,
  type ConsumerSpec,
  type EventBus,
  type Logger,
  type Orm,
  pruneProcessedEvents,
  SUBJECTS,
} from "@rowbase/kit";
import type { AuditLog } from "./audit-log.js";
import type { UsageStats } from "./usage-stats.js";

/** The organization service's durable consumers (also its names in `processed_event`). */
export const DURABLES = {
  audit: "organization_audit",
  usage: "organization_usage",
} as const;

/** How often the audit partitions are prepared and expired events removed. */
export const AUDIT_MAINTENANCE_INTERVAL_MS = 3600 * 1000;

/**
 * Audit and usage events each go to their own rows (the log is read by time and id, the sums
 * add up in any order), so each consumer applies this many at once: one at a time, waiting on
 * PostgreSQL for every event, it stored 1,500 audit events a second and needed over a minute
 * for a 100,000-record import. Two consumers at 4 leave 2 of the pool's 10 connections to calls.
 */
const EVENTS_AT_ONCE = 4;

/**
 * The audit consumer also stores the messages that arrived while it was busy in one statement:
 * under a stream of single creates it wrote one statement (and committed once) per event.
 * The byte budget keeps a statement to about one `audit.batch` message of a bulk import.
 */
const AUDIT_BATCH = { messages: 100, bytes: 256 * 1024 };

/**
 * The audit store's and usage statistics' consumers (each event applied once per id, see
 * `consumeClaimed`) and the hourly audit maintenance, which also runs once before consuming so
 * that this month's partition exists.
 */
export async function startEventConsumers(deps: {
  orm: Orm;
  bus: EventBus;
  logger: Logger;
  auditLog: AuditLog;
  usage: UsageStats;
  maintenanceIntervalMs?: number;
}): Promise<{ stop(): Promise<void> }> {
  const { orm, bus, logger } = deps;
  let maintaining: Promise<void> | undefined;
  const maintain = () => {
    maintaining ??= deps.auditLog.maintain().finally(() => {
      maintaining = undefined;
    });
    return maintaining;
  };
  await maintain();
  const timer = setInterval(maintain, deps.maintenanceIntervalMs ?? AUDIT_MAINTENANCE_INTERVAL_MS);
  timer.unref();

  const consumers: { stop(): Promise<void> }[] = [];
  const stop = async () => {
    clearInterval(timer);
    for (const consumer of consumers) await consumer.stop();
    await maintaining;
  };
  try {
    consumers.push(
      await consumeClaimed(
        orm,
        bus,
        {
          stream: "AUDIT",
          durable: DURABLES.audit,
          subject: SUBJECTS.auditAny,
          concurrency: EVENTS_AT_ONCE,
          batch: AUDIT_BATCH,
        },
        async (em, messages) => {
          await deps.auditLog.apply(em, DURABLES.audit, messages);
        },
        logger,
      ),
    );
    consumers.push(
      await consumeClaimed(
        orm,
        bus,
        {
          stream: "USAGE",
          durable: DURABLES.usage,
          subject: SUBJECTS.usageAny,
          concurrency: EVENTS_AT_ONCE,
        },
        async (em, messages) => {
          for (const message of messages) await deps.usage.apply(em, DURABLES.usage, message);
        },
        logger,
      ),
    );
  } catch (error) {
    await stop();
    throw error;
  }
  return { stop };
}

/**
 * A durable consumer whose `apply` claims each event's id in `processed_event` in the same
 * statement as its writes (data-modifying CTEs: atomic without a transaction around them, and a
 * concurrent second delivery waits on the claim, then skips), so each event is applied exactly
 * once, as kit's `consumeOnce` does it, in one round trip to PostgreSQL instead of four. It gets
 * the messages of a batch together when `spec.batch` is set (`consumeBatches`), else one at a
 * time. The messages are acknowledged after the statement; a failure leaves them to be
 * redelivered. Ids are pruned hourly, as `consumeOnce` prunes them.
 */
export async function consumeClaimed(
  orm: Orm,
  bus: EventBus,
  spec: ConsumerSpec,
  apply: (em: EntityManager, messages: BusMessage[]) => Promise<unknown>,
  logger: Logger,
  pruneIntervalMs = 3600 * 1000,
): Promise<{ stop(): Promise<void> }> {
  const consumer = await bus.consumeBatches(spec, async (messages) => {
    await apply(orm.em.fork(), messages);
  });
  let pruning: Promise<unknown> | undefined;
  const timer = setInterval(() => {
    pruning ??= pruneProcessedEvents(orm, spec.durable)
      .catch((error: unknown) =>
        logger.warn({ err: error, durable: spec.durable }, "processed events not pruned"),
      )
      .finally(() => {
        pruning = undefined;
      });
  }, pruneIntervalMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await consumer.stop();
      await pruning;
    },
  };
}
