import { randomUUID } from "node:crypto";
import { defineEntity, type EntityManager, p } from "@mikro-orm/postgresql";
import type { EventBus } from "./bus.js";
import type { Orm } from "./db.js";
import { undeliverable } from "./dead-letters.js";
import type { Logger } from "./logger.js";
import { type MetricsRegistry, outboxMetrics, processMetricsRegistry } from "./metrics.js";
import { query } from "./sql.js";
import { untraced } from "./tracing.js";

/** The outbox table; every service that publishes events creates it in its first migration. */
export const OUTBOX_TABLE_SQL = `
create table outbox (
  seq bigint generated always as identity primary key,
  event_id uuid not null unique,
  subject text not null,
  payload bytea not null,
  created_at timestamptz not null default now(),
  published_at timestamptz
);
create index outbox_pending on outbox (seq) where published_at is null;
`;

/**
 * The outbox row as an entity. Events are written and relayed with SQL; the entity is there
 * because MikroORM refuses to start with none, and records and files map no table of their own.
 */
export const OutboxEvent = defineEntity({
  name: "OutboxEvent",
  tableName: "outbox",
  properties: {
    seq: p.bigint().primary().autoincrement().columnType("bigint"),
    eventId: p.uuid().unique(),
    subject: p.text(),
    payload: p.blob(),
    createdAt: p.datetime(),
    publishedAt: p.datetime().nullable(),
  },
});

/** One event for the outbox: its subject, its protobuf bytes and its id. */
export interface OutboxEntry {
  subject: string;
  payload: Uint8Array;
  /** Also the JetStream message id, which consumers deduplicate on. */
  eventId: string;
  /**
   * Never published: a trigger of the service's own takes the row out of the outbox as it is
   * written (records' change log), so the bus's size limit does not apply to it.
   */
  local?: boolean;
}

/**
 * The largest event the outbox takes: NATS refuses a message over 1 MiB (its default
 * max_payload), and an event it refuses would stay first in the outbox and hold back every later
 * event. The write that made it fails instead (a defect: every event is built to stay far under).
 */
export const MAX_EVENT_BYTES = 1024 * 1024 - 16 * 1024;

/** Rows per insert statement: three parameters each, far under PostgreSQL's 65,535. */
const ENQUEUE_CHUNK = 5000;

/**
 * The statement that adds `entries` to the outbox, in order, with one row of parameters per
 * entry: a payload as a top-level Buffer parameter travels as binary, where a `bytea[]` array
 * would be written out as hex text (twice its size, then concatenated into one literal). Its
 * parameters are numbered from `firstParam`; with `condition` (SQL) it adds them only when that
 * holds, for a statement that decides in itself whether its change is made.
 */
export function outboxInsert(
  entries: readonly OutboxEntry[],
  firstParam = 1,
  condition?: string,
): { sql: string; params: unknown[] } {
  const rows = entries.map((_, i) => {
    const at = firstParam + 3 * i;
    return `($${at}::uuid, $${at + 1}, $${at + 2}::bytea)`;
  });
  const values = `values ${rows.join(", ")}`;
  return {
    sql: `insert into outbox (event_id, subject, payload) ${
      condition ? `select * from (${values}) as event where ${condition}` : values
    }`,
    params: entries.flatMap((entry) => {
      if (entry.payload.byteLength > MAX_EVENT_BYTES && !entry.local) {
        throw new Error(
          `event ${entry.subject} of ${entry.payload.byteLength} bytes is over the bus's limit`,
        );
      }
      return [
        entry.eventId,
        entry.subject,
        Buffer.from(entry.payload.buffer, entry.payload.byteOffset, entry.payload.byteLength),
      ];
    }),
  };
}

/** Inserts of up to this many events go as prepared statements (`query`'s `prepare`). */
export const OUTBOX_PREPARED_EVENTS_MAX = 4;

/**
 * Records events in the caller's transaction, in order, with one statement per 5000 events
 * (values as real query parameters, not SQL text): they are published if and only if the change
 * commits.
 */
export async function enqueueEvents(
  em: EntityManager,
  entries: readonly OutboxEntry[],
): Promise<void> {
  for (let start = 0; start < entries.length; start += ENQUEUE_CHUNK) {
    const chunk = entries.slice(start, start + ENQUEUE_CHUNK);
    const { sql, params } = outboxInsert(chunk);
    // One text per row count: the counts of single writes are prepared, a few texts in all.
    await query(em, sql, params, { prepare: chunk.length <= OUTBOX_PREPARED_EVENTS_MAX });
  }
}

/**
 * Runs `sql` (one statement that does not start with WITH) and adds `entries` to the outbox in
 * the same statement, as a data-modifying WITH in front of it: the last statement of a
 * transaction takes its events along instead of sending them in a round trip of their own.
 * Returns the statement's rows. Events past one insert's worth go in a statement of their own
 * first, in order.
 */
export async function queryWithOutbox<R extends object = Record<string, unknown>>(
  em: EntityManager,
  entries: readonly OutboxEntry[],
  sql: string,
  params: readonly unknown[],
  options: { prepare?: boolean } = {},
): Promise<R[]> {
  if (entries.length === 0) return query<R>(em, sql, params, options);
  const last = Math.floor((entries.length - 1) / ENQUEUE_CHUNK) * ENQUEUE_CHUNK;
  if (last > 0) await enqueueEvents(em, entries.slice(0, last));
  const chunk = entries.slice(last);
  const statement = withOutboxInsert(chunk, sql, params);
  return query<R>(em, statement.sql, statement.params, {
    prepare: options.prepare === true && chunk.length <= OUTBOX_PREPARED_EVENTS_MAX,
  });
}

/** `sql` with `entries` (one insert's worth) added to the outbox in front of it. */
export function withOutboxInsert(
  entries: readonly OutboxEntry[],
  sql: string,
  params: readonly unknown[],
): { sql: string; params: unknown[] } {
  const insert = outboxInsert(entries, params.length + 1);
  return { sql: `with enqueued as (${insert.sql}) ${sql}`, params: [...params, ...insert.params] };
}

/**
 * Records an event in the caller's transaction: it is published if and only if the change
 * commits. Returns the event id, which is also the JetStream message id.
 */
export async function enqueueEvent(
  em: EntityManager,
  subject: string,
  payload: Uint8Array,
  eventId: string = randomUUID(),
): Promise<string> {
  await enqueueEvents(em, [{ subject, payload, eventId }]);
  return eventId;
}

export interface OutboxRelayOptions {
  intervalMs?: number;
  batchSize?: number;
  /** Published rows older than this are deleted. */
  retainPublishedMs?: number;
  /** How often a round also measures the lag (pending events, oldest age) for the gauges. */
  lagSampleMs?: number;
  /** Where the lag gauges are; the process's registry when absent. */
  metrics?: MetricsRegistry;
  /**
   * When an event that NATS can never take is given up on (see `OutboxRelay`): after this many
   * failed rounds in a row, the first of them at least `afterMs` ago. 10 and 5 minutes when
   * absent.
   */
  giveUp?: { attempts: number; afterMs: number };
  /**
   * The payloads of committed events the relay keeps to publish them from memory (`kick`): at
   * most this many events and bytes, each for at most `ms` (the payload of an event another
   * replica relays is let go when its time is up). 256 events, 16 MiB and 30 s when absent.
   */
  hold?: { events: number; bytes: number; ms: number };
}

/** Where a schema's given-up events go (the DEAD stream stores `dead.>`). */
export function outboxDeadLetterSubject(schema: string): string {
  return `dead.outbox.${schema.replace(/[^A-Za-z0-9_-]/g, "_")}`;
}

/** A pending row as a relay round claims it: no payload for an event the relay holds. */
interface ClaimedRow {
  seq: string;
  event_id: string;
  subject: string;
  payload: string | null;
}

/**
 * Publishes committed outbox rows in order and marks them sent. Rows are claimed with
 * `for update skip locked`, so several replicas can relay side by side; a failed publish
 * leaves them pending for the next round (nothing is lost while NATS is down).
 *
 * An event NATS can never take (a subject no stream takes: a defect) would hold back every
 * later event of the schema for good: the usage counts, the audit log, the deletion sagas.
 * Once its publish has failed so (`undeliverable`) in `giveUp.attempts` rounds in a row over at
 * least `giveUp.afterMs`, the event goes to the DEAD stream instead (`dead.outbox.<schema>`,
 * with its subject, id and last error in the headers) and the rest follow. Only if the DEAD
 * stream stores it: while JetStream is away, that fails too and everything waits. Any other
 * failure (a full stream, a timeout, a lost connection) only ever delays the events.
 */
export class OutboxRelay {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  private lastCleanup = 0;
  private lastLagSample = 0;
  private readonly intervalMs: number;
  private readonly batchSize: number;
  private readonly retainPublishedMs: number;
  private readonly lagSampleMs: number;
  private readonly lag: ReturnType<typeof outboxMetrics>;
  private readonly schema: string;
  private readonly giveUp: { attempts: number; afterMs: number };
  private readonly hold: { events: number; bytes: number; ms: number };
  /** The rows whose publish failed in the last round: failed rounds in a row, since when. */
  private failures = new Map<string, { attempts: number; since: number }>();
  /** Payloads of committed events not yet published, by event id (`kick`, `hold`). */
  private readonly held = new Map<string, { payload: Uint8Array; at: number }>();
  private heldBytes = 0;

  constructor(
    private readonly orm: Orm,
    private readonly bus: EventBus,
    private readonly logger: Logger,
    options: OutboxRelayOptions = {},
  ) {
    this.intervalMs = options.intervalMs ?? 500;
    this.batchSize = options.batchSize ?? 100;
    this.retainPublishedMs = options.retainPublishedMs ?? 24 * 3600 * 1000;
    this.lagSampleMs = options.lagSampleMs ?? 5_000;
    this.lag = outboxMetrics(options.metrics ?? processMetricsRegistry());
    this.schema = String(orm.config.get("schema") ?? "public");
    this.giveUp = options.giveUp ?? { attempts: 10, afterMs: 5 * 60_000 };
    this.hold = options.hold ?? { events: 256, bytes: 16 * 1024 * 1024, ms: 30_000 };
  }

  start() {
    this.stopped = false;
    this.timer = setInterval(() => this.kick(), this.intervalMs);
    this.timer.unref();
    this.kick();
  }

  /**
   * Runs a relay round now; called after a commit that enqueued events, with those events. Their
   * payloads are kept (within `hold`) for the round that claims their rows, so that it publishes
   * them as they are instead of reading them back: a batch write's audit messages are hundreds
   * of kilobytes, which PostgreSQL would decompress and encode and the driver decode again.
   * The outbox stays the record of what to publish: a payload held for a row that is never
   * claimed here (rolled back after all, or relayed by another replica) is only let go.
   */
  kick(committed: readonly OutboxEntry[] = []): void {
    if (this.stopped) return;
    const now = Date.now();
    for (const entry of committed) {
      const bytes = entry.payload.byteLength;
      if (entry.local || this.held.has(entry.eventId)) continue;
      if (this.held.size >= this.hold.events || this.heldBytes + bytes > this.hold.bytes) break;
      this.held.set(entry.eventId, { payload: entry.payload, at: now });
      this.heldBytes += bytes;
    }
    if (this.running) {
      this.again = true;
      return;
    }
    // A kick comes after a commit, inside that request's trace: the round is not part of it.
    this.running = untraced(() => this.round())
      .catch((error) => this.logger.warn({ err: error }, "outbox relay round failed"))
      .finally(() => {
        this.running = undefined;
        if (this.again) {
          this.again = false;
          this.kick();
        }
      });
  }

  /**
   * Publishes everything pending; resolves when the outbox is empty, or at once when another
   * replica is relaying it (used by tests).
   */
  async flush(): Promise<void> {
    while ((await this.relayBatch()) === this.batchSize) {}
  }

  /**
   * Stops relaying; resolves once the batch in flight is published. A backlog stays in the
   * outbox for the other replicas or the next start: draining it first could outlast the
   * shutdown grace (after a bulk import: hundreds of thousands of audit events, minutes).
   */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.running;
  }

  /** Drains, then measures the lag when a sample is due, also (above all) when draining failed. */
  private async round() {
    try {
      await this.drain();
    } finally {
      if (Date.now() - this.lastLagSample >= this.lagSampleMs) {
        this.lastLagSample = Date.now();
        await this.sampleLag().catch((error) =>
          this.logger.warn({ err: error }, "outbox lag not measured"),
        );
      }
    }
  }

  /** Sets the lag gauges from the pending rows (the partial index `outbox_pending` has them). */
  async sampleLag(): Promise<void> {
    const [row] = await this.orm.em.fork().execute<{ pending: string; age: number | null }[]>(
      `select count(*) as pending, extract(epoch from now() - min(created_at))::float8 as age
       from outbox where published_at is null`,
    );
    this.lag.pending.set({ schema: this.schema }, Number(row?.pending ?? 0));
    this.lag.oldestAge.set({ schema: this.schema }, Math.max(0, row?.age ?? 0));
  }

  private async drain() {
    while (!this.stopped && (await this.relayBatch()) === this.batchSize) {}
    if (Date.now() - this.lastCleanup > 60_000) {
      this.lastCleanup = Date.now();
      await this.orm.em
        .fork()
        .execute(
          "delete from outbox where published_at is not null and published_at < now() - (? * interval '1 millisecond')",
          [this.retainPublishedMs],
        );
    }
  }

  /** Publishes one batch in one transaction; returns how many rows it published. */
  private async relayBatch(): Promise<number> {
    const held = this.heldNow();
    const published = await this.orm.em.fork().transactional(async (em) => {
      // Claimed and marked in one statement: the rows stay locked until the publishes are
      // acknowledged, and a failure rolls the mark back. One replica relays a schema's outbox at
      // a time (the advisory lock; the others' rounds find nothing), so events reach the stream
      // in the order they were written: two relays publishing neighbouring batches at once could
      // deliver a table's later change before its earlier one. The payload comes as base64
      // rather than bytea's hex text: a third less text for the driver to decode (it reads every
      // column as a string), which was a tenth of records' time in batch imports; and not at all
      // for the events whose payloads the relay holds.
      const rows = await query<ClaimedRow>(
        em,
        `with relay as materialized (
           select pg_try_advisory_xact_lock(
                    hashtextextended('rowbase.outbox-relay:' || current_schema(), 0)) as mine)
         update outbox set published_at = now()
         from relay
         where relay.mine
           and seq in (select seq from outbox where published_at is null
                       order by seq limit $1 for update skip locked)
         returning seq, event_id, subject,
           case when event_id = any($2::uuid[]) then null
                else encode(payload, 'base64') end as payload`,
        [this.batchSize, [...held.keys()]],
        { prepare: true },
      );
      rows.sort((a, b) => (BigInt(a.seq) < BigInt(b.seq) ? -1 : 1));
      // Sent in order on one connection, acknowledged together; a failure leaves the whole batch
      // pending, and JetStream drops the repeats of those already stored (same message id).
      const publishAll = () =>
        rows.map((row) => this.bus.publish(row.subject, payloadOf(row, held), row.event_id));
      // The in-process bus runs consumers inside publish: their errors keep their stacks.
      const settled = await Promise.allSettled(
        this.bus.kind === "nats" ? withoutStackTraces(publishAll) : publishAll(),
      );
      const failed = rows.flatMap((row, i) => {
        const outcome = settled[i] as PromiseSettledResult<void>;
        return outcome.status === "rejected" ? [{ row, error: outcome.reason as unknown }] : [];
      });
      if (failed.length > 0) await this.deadLetterOrThrow(failed, held);
      this.failures.clear();
      return rows;
    });
    for (const row of published) this.release(row.event_id);
    return published.length;
  }

  /** The payloads held now, those held for too long let go first. */
  private heldNow(): ReadonlyMap<string, Uint8Array> {
    const since = Date.now() - this.hold.ms;
    for (const [eventId, { at }] of this.held) if (at < since) this.release(eventId);
    return new Map([...this.held].map(([eventId, { payload }]) => [eventId, payload]));
  }

  private release(eventId: string): void {
    const entry = this.held.get(eventId);
    if (!entry) return;
    this.held.delete(eventId);
    this.heldBytes -= entry.payload.byteLength;
  }

  /**
   * Counts the failed publishes of a round; when every failed row is due to be given up,
   * dead-letters them (and the round commits), else throws the first error (and the batch
   * stays pending).
   */
  private async deadLetterOrThrow(
    failed: { row: ClaimedRow; error: unknown }[],
    held: ReadonlyMap<string, Uint8Array>,
  ): Promise<void> {
    const now = Date.now();
    const previous = this.failures;
    this.failures = new Map(
      failed.map(({ row }) => {
        const before = previous.get(row.seq);
        return [row.seq, { attempts: (before?.attempts ?? 0) + 1, since: before?.since ?? now }];
      }),
    );
    const due =
      failed.every(({ error }) => undeliverable(error)) &&
      [...this.failures.values()].every(
        (f) => f.attempts >= this.giveUp.attempts && now - f.since >= this.giveUp.afterMs,
      );
    if (!due) throw (failed[0] as { error: unknown }).error;
    for (const { row, error } of failed) {
      const attempts = this.failures.get(row.seq)?.attempts ?? 0;
      await this.bus.deadLetter({
        subject: outboxDeadLetterSubject(this.schema),
        message: {
          subject: row.subject,
          data: payloadOf(row, held),
          id: row.event_id,
        },
        origin: `outbox:${this.schema}`,
        attempts,
        error,
      });
      this.logger.error(
        { err: error, subject: row.subject, id: row.event_id, schema: this.schema, attempts },
        "outbox event dead-lettered: its publish kept failing",
      );
    }
  }
}

/** A claimed row's payload: the one held for it, else the one it came with. */
function payloadOf(row: ClaimedRow, held: ReadonlyMap<string, Uint8Array>): Uint8Array {
  const payload = held.get(row.event_id);
  if (payload) return payload;
  if (row.payload === null) throw new Error(`outbox event ${row.event_id} came without payload`);
  return Buffer.from(row.payload, "base64");
}

/**
 * Runs `work` (synchronously) with V8's stack capture off. The NATS client builds two Error
 * objects per JetStream publish up front (synchronously, in the publish call), in case the request fails or times out; capturing
 * their stacks was a fifth of the records service's CPU under batch writes, and a stack into
 * the client's internals tells nothing the error's message does not.
 */
function withoutStackTraces<T>(work: () => T): T {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return work();
  } finally {
    Error.stackTraceLimit = limit;
  }
}
