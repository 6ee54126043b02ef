import type { EntityManager } from "@mikro-orm/postgresql";
import type { BusMessage, ConsumerSpec, EventBus } from "./bus.js";
import type { Orm } from "./db.js";
import type { Logger } from "./logger.js";

/**
 * The ids of the events each consumer has applied; a service that consumes with `consumeOnce`
 * creates it in a migration. The primary key makes a concurrent second delivery of the same
 * event wait for the first one's transaction, then skip (or apply, if the first rolled back).
 */
export const PROCESSED_EVENT_TABLE_SQL = `
create table processed_event (
  consumer text not null,
  event_id text not null,
  processed_at timestamptz not null default now(),
  primary key (consumer, event_id)
);
create index processed_event_by_time on processed_event (processed_at);
`;

/**
 * What to do once the transaction that applied an event has committed (wake a relay, evict
 * caches, hand released bytes to a collector). It runs before the acknowledgement, and only when
 * the event was applied; the event is already recorded, so it must not rely on a redelivery.
 */
export type AfterCommit = () => Promise<void> | void;

/**
 * Applies one event inside the consumer's transaction; `em` is bound to that transaction. It may
 * return what to do after the commit.
 */
// biome-ignore lint/suspicious/noConfusingVoidType: a handler that returns nothing is the usual one.
export type OnceHandler = (em: EntityManager, message: BusMessage) => Promise<void | AfterCommit>;

export interface ConsumeOnceOptions {
  /**
   * How long applied ids are remembered: longer than any message can be redelivered or
   * republished after it was applied, i.e. longer than the stream keeps it (7 days). 14 days
   * when absent.
   */
  retainMs?: number;
  /** How often old ids are pruned; hourly when absent. */
  pruneIntervalMs?: number;
  /**
   * Work done on every delivery before the transaction starts, in transactions of its own: it
   * must be idempotent (a large change applied in batches, the last of which the handler applies
   * with the id). A throw leaves the message to be redelivered.
   */
  beforeTransaction?: (message: BusMessage) => Promise<void>;
  logger?: Logger;
}

const DAY_MS = 24 * 3600 * 1000;
export const PROCESSED_EVENT_RETAIN_MS = 14 * DAY_MS;

/**
 * Applies `message` unless `consumer` already did: the id is recorded in the same transaction
 * as the handler's writes, so either both commit or neither does. Returns whether it applied.
 */
export async function applyOnce(
  orm: Orm,
  consumer: string,
  message: BusMessage,
  handler: OnceHandler,
): Promise<boolean> {
  let afterCommit: AfterCommit | undefined;
  const applied = await orm.em.fork().transactional(async (em) => {
    afterCommit = undefined;
    const claimed = await em.execute<{ event_id: string }[]>(
      `insert into processed_event (consumer, event_id) values (?, ?)
       on conflict (consumer, event_id) do nothing returning event_id`,
      [consumer, message.id],
    );
    if (claimed.length === 0) return false;
    afterCommit = (await handler(em, message)) ?? undefined;
    return true;
  });
  if (applied && afterCommit) await afterCommit();
  return applied;
}

/** Deletes remembered ids older than `retainMs`; returns how many. */
export async function pruneProcessedEvents(
  orm: Orm,
  consumer: string,
  retainMs: number = PROCESSED_EVENT_RETAIN_MS,
): Promise<number> {
  const deleted = await orm.em.fork().execute<{ event_id: string }[]>(
    `delete from processed_event
       where consumer = ? and processed_at < now() - (? * interval '1 millisecond')
       returning event_id`,
    [consumer, retainMs],
  );
  return deleted.length;
}

/**
 * A durable consumer whose handler is applied exactly once per event id, however often the
 * event is delivered (a crash before the ack, an expired ack wait, a republish after the
 * duplicate window): the id goes into `processed_event` in the handler's transaction, ids
 * already there are skipped, and the message is acknowledged only after the commit. A handler
 * that throws rolls everything back and the bus redelivers (then dead-letters) the message.
 * The durable name is the consumer name in the table. Old ids are pruned periodically. What the
 * handler returns runs after the commit; `beforeTransaction` runs before it.
 */
export async function consumeOnce(
  orm: Orm,
  bus: EventBus,
  spec: ConsumerSpec,
  handler: OnceHandler,
  options: ConsumeOnceOptions = {},
): Promise<{ stop(): Promise<void> }> {
  const retainMs = options.retainMs ?? PROCESSED_EVENT_RETAIN_MS;
  const consumer = await bus.consume(spec, async (message) => {
    await options.beforeTransaction?.(message);
    const applied = await applyOnce(orm, spec.durable, message, handler);
    if (!applied) {
      options.logger?.debug(
        { durable: spec.durable, id: message.id, subject: message.subject },
        "event already applied: skipped",
      );
    }
  });
  let pruning: Promise<unknown> | undefined;
  const prune = () => {
    pruning ??= pruneProcessedEvents(orm, spec.durable, retainMs)
      .catch((error: unknown) =>
        options.logger?.warn({ err: error, durable: spec.durable }, "processed events not pruned"),
      )
      .finally(() => {
        pruning = undefined;
      });
  };
  const timer = setInterval(prune, options.pruneIntervalMs ?? 3600 * 1000);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await consumer.stop();
      await pruning;
    },
  };
}
