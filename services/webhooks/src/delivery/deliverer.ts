import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { EntityManager } from "@mikro-orm/postgresql";
import { isUnreachableDependency, type Logger, type Orm, query } from "@rowbase/kit";
import type { AllowedTargets } from "../domain/address-policy.js";
import { retryDelayMs } from "../domain/retry-schedule.js";
import { signedHeaders } from "../domain/signature.js";
import { type AttemptOutcome, attemptDelivery } from "./attempt.js";
import type { DeliveryMetrics } from "./metrics.js";
import type { StoppedWebhook } from "./notifier.js";

/** Deliveries in flight to one webhook at most, over every replica. */
export const MAX_IN_FLIGHT_PER_WEBHOOK = 4;
/** Attempts failed in a row, across deliveries, that stop a webhook. */
export const MAX_CONSECUTIVE_FAILURES = 50;
/** Deliveries in flight in one process at most. */
const MAX_IN_FLIGHT = 64;
/** How long a claimed attempt may take past its timeout before another worker takes it again. */
const LEASE_MARGIN_MS = 30_000;
/**
 * Pauses before writing an attempt's outcome again while PostgreSQL cannot be reached (about
 * 8 s in all): an outcome left unwritten holds its lease, one of the webhook's 4 places and its
 * record's next change until the lease runs out, and the delivery is then sent again.
 */
const OUTCOME_RETRY_MS = [250, 500, 1_000, 2_000, 4_000];

/**
 * An attempt's outcome on its delivery ($7 its new status, $8 the pause before the next attempt
 * in ms), under the lease it was claimed with: another worker's outcome, after the lease ran
 * out, counts instead.
 */
const WRITE_OUTCOME = `update delivery set attempts = $3, response_status = $4, error = $5,
    duration_ms = $6, status = $7,
    next_attempt_at = case when $7 = 'pending'
      then now() + make_interval(secs => $8::double precision / 1000) end,
    finished_at = case when $7 = 'pending' then null else now() end,
    lease = null, lease_until = null
  where id = $1 and lease = $2 and status = 'pending'`;

/** A claimed delivery with what its attempt needs. */
interface Claimed {
  id: bigint;
  webhookId: bigint;
  messageId: string;
  payload: string;
  attempts: number;
  url: string;
  secrets: string[];
  /** Held until the outcome is written. */
  lease: string;
}

/** What one attempt did to its delivery and webhook. */
export type Verdict =
  | { kind: "succeeded" }
  | { kind: "retry"; delayMs: number }
  | { kind: "failed" }
  | { kind: "gone" };

/** The verdict on an attempt that was the `attempts`-th of its delivery. */
export function verdictOf(
  outcome: Pick<AttemptOutcome, "status">,
  attempts: number,
  schedule: readonly number[],
): Verdict {
  const status = outcome.status;
  if (status !== undefined && status >= 200 && status < 300) return { kind: "succeeded" };
  if (status === 410) return { kind: "gone" };
  const delayMs = retryDelayMs(schedule, attempts);
  return delayMs === undefined ? { kind: "failed" } : { kind: "retry", delayMs };
}

/**
 * Stops a webhook on its own (`failures` or `gone`), in the caller's transaction: it is no
 * longer followed, and its pending deliveries fail with `webhook_disabled` (they can be
 * redelivered once it is on again). Answers the webhook when it was on.
 */
export async function stopWebhook(
  em: EntityManager,
  webhookId: bigint,
  reason: "failures" | "gone",
): Promise<StoppedWebhook | undefined> {
  const [stopped] = await query<{
    id: string;
    organization_id: string;
    table_id: string;
    url: string;
  }>(
    em,
    `update webhook set active = false, disabled_reason = $2, updated_at = now()
     where id = $1 and active returning id, organization_id, table_id, url`,
    [webhookId, reason],
  );
  if (!stopped) return undefined;
  await query(
    em,
    `update delivery set status = 'failed', error = 'webhook_disabled', next_attempt_at = null,
       lease = null, lease_until = null, finished_at = now()
     where webhook_id = $1 and status = 'pending'`,
    [webhookId],
  );
  return {
    id: BigInt(stopped.id),
    organizationId: BigInt(stopped.organization_id),
    tableId: BigInt(stopped.table_id),
    url: stopped.url,
  };
}

export interface DelivererOptions {
  orm: Orm;
  logger: Logger;
  allowed: AllowedTargets;
  timeoutMs: number;
  /** WEBHOOK_RETRY_SCHEDULE, seconds. */
  schedule: readonly number[];
  pollMs: number;
  retentionSeconds: number;
  /** A webhook stopped after failures (its owner and admins are told). */
  stopped: (webhook: StoppedWebhook) => Promise<void>;
  metrics: DeliveryMetrics;
}

/**
 * Sends due deliveries. Deliveries are claimed with a lease in a transaction that holds the
 * webhook's claim lock (an advisory lock that only claims take, tried, so that replicas share
 * the webhooks between them and an outcome being written never holds a claim up) and counts
 * the leases the webhook holds: at most MAX_IN_FLIGHT_PER_WEBHOOK are in flight per webhook,
 * over every replica. The claimed rows are locked `for update skip locked`. A delivery is not claimed while an earlier one of the same record
 * is pending: a record's changes reach a webhook in their order. The outcome is written under
 * the same lease; a worker that died mid-attempt leaves its lease to expire, and the delivery is
 * tried again (at least once).
 */
export class Deliverer {
  private readonly inFlight = new Set<Promise<void>>();
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  private woken = false;
  private lastCleanup = 0;

  constructor(private readonly o: DelivererOptions) {}

  start(): void {
    this.schedule(0);
  }

  /** Looks for due deliveries now (new ones were queued, or an attempt ended). */
  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.woken = true;
      return;
    }
    this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
    await Promise.all(this.inFlight);
  }

  private schedule(ms: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      if (this.stopped || this.running) return;
      this.woken = false;
      this.running = this.round()
        .catch((error: unknown) => this.o.logger.warn({ err: error }, "webhook delivery failed"))
        .finally(() => {
          this.running = undefined;
          if (!this.stopped) this.schedule(this.woken ? 0 : this.o.pollMs);
        });
    }, ms);
  }

  /** Claims what is due, within the process's room, and starts each attempt. */
  async round(): Promise<void> {
    await this.cleanup();
    const room = MAX_IN_FLIGHT - this.inFlight.size;
    if (room <= 0) return;
    for (const claimed of await this.claim(room)) {
      const attempt = this.attempt(claimed)
        .catch((error: unknown) =>
          this.o.logger.warn(
            { err: error, deliveryId: claimed.id.toString() },
            "webhook delivery failed",
          ),
        )
        .finally(() => {
          this.inFlight.delete(attempt);
          this.wake();
        });
      this.inFlight.add(attempt);
    }
  }

  private async claim(room: number): Promise<Claimed[]> {
    const lease = randomUUID();
    // One statement, its own transaction: the claim locks last as long as it does.
    const rows = await query<{
      id: string;
      webhook_id: string;
      message_id: string;
      payload: string;
      attempts: number;
      url: string;
      secret: string;
      previous_secret: string | null;
    }>(
      this.o.orm.em.fork(),
      `with hooks as (
           select w.id from webhook w
           where w.active and exists (
             select 1 from delivery d
             where d.webhook_id = w.id and d.status = 'pending' and d.next_attempt_at <= now()
               and (d.lease_until is null or d.lease_until < now()))
             and pg_try_advisory_xact_lock(hashtextextended('webhooks.claim:' || w.id, 0))
           order by w.id
           limit 100
         ),
         room as (
           select h.id, $3 - (select count(*) from delivery f
             where f.webhook_id = h.id and f.status = 'pending' and f.lease_until >= now()) as free
           from hooks h
         ),
         chosen as (
           select d.id from room r
           cross join lateral (
             select d.id from delivery d
             where d.webhook_id = r.id and d.status = 'pending' and d.next_attempt_at <= now()
               and (d.lease_until is null or d.lease_until < now())
               and not exists (
                 select 1 from delivery e
                 where e.webhook_id = d.webhook_id and e.status = 'pending'
                   and e.row_id = d.row_id and e.id < d.id)
             order by d.id
             limit greatest(r.free, 0)
             for update of d skip locked
           ) d
           order by d.id
           limit $4
         )
         update delivery d
         set lease = $1, lease_until = now() + make_interval(secs => $2::double precision / 1000)
         from webhook w
         where d.id in (select id from chosen) and w.id = d.webhook_id
         returning d.id, d.webhook_id, d.message_id, d.payload, d.attempts, w.url, w.secret,
           case when w.previous_secret_expires_at > now() then w.previous_secret end
             as previous_secret`,
      [lease, this.o.timeoutMs + LEASE_MARGIN_MS, MAX_IN_FLIGHT_PER_WEBHOOK, room],
    );
    return rows.map((row) => ({
      id: BigInt(row.id),
      webhookId: BigInt(row.webhook_id),
      messageId: row.message_id,
      payload: row.payload,
      attempts: Number(row.attempts),
      url: row.url,
      secrets: row.previous_secret ? [row.secret, row.previous_secret] : [row.secret],
      lease,
    }));
  }

  private async attempt(claimed: Claimed): Promise<void> {
    const outcome = await attemptDelivery({
      url: claimed.url,
      body: claimed.payload,
      headers: signedHeaders(
        claimed.secrets,
        claimed.messageId,
        Math.floor(Date.now() / 1000),
        claimed.payload,
      ),
      allowed: this.o.allowed,
      timeoutMs: this.o.timeoutMs,
    });
    const attempts = claimed.attempts + 1;
    const verdict = verdictOf(outcome, attempts, this.o.schedule);
    this.o.metrics.attempts.inc({ outcome: verdict.kind });
    this.o.metrics.duration.observe({ outcome: verdict.kind }, outcome.durationMs / 1000);
    const outcomeParams = [
      claimed.id,
      claimed.lease,
      attempts,
      outcome.status ?? null,
      outcome.error ?? null,
      outcome.durationMs,
      verdict.kind === "succeeded" ? "succeeded" : verdict.kind === "retry" ? "pending" : "failed",
      verdict.kind === "retry" ? verdict.delayMs : 0,
    ];
    if (verdict.kind === "succeeded") {
      // A success stops nothing: the outcome and the webhook's reset in one statement, one round
      // trip (most attempts succeed, and each round trip is a place of 4 held that much longer).
      await this.outcomeWritten(() =>
        query(
          this.o.orm.em.fork(),
          `with written as (${WRITE_OUTCOME} returning webhook_id)
           update webhook set last_delivery_at = now(), consecutive_failures = 0
           where id = (select webhook_id from written)`,
          outcomeParams,
        ),
      );
      return;
    }
    const stopped = await this.outcomeWritten(() =>
      this.o.orm.em.fork().transactional(async (em) => {
        const written = await query(em, `${WRITE_OUTCOME} returning id`, outcomeParams);
        // Another worker took the delivery after this lease expired: its outcome counts.
        if (written.length === 0) return undefined;
        const [webhook] = await query<{ consecutive_failures: number }>(
          em,
          `update webhook set last_delivery_at = now(), consecutive_failures = consecutive_failures + 1
           where id = $1 returning consecutive_failures`,
          [claimed.webhookId],
        );
        if (!webhook) return undefined;
        const failures = Number(webhook.consecutive_failures);
        if (verdict.kind === "gone") {
          await stopWebhook(em, claimed.webhookId, "gone");
          return undefined;
        }
        if (verdict.kind === "failed" || failures >= MAX_CONSECUTIVE_FAILURES) {
          return stopWebhook(em, claimed.webhookId, "failures");
        }
        return undefined;
      }),
    );
    if (stopped) await this.o.stopped(stopped);
  }

  /**
   * Writes an outcome, again after a pause while PostgreSQL is away (OUTCOME_RETRY_MS). A write
   * that committed although its answer was lost is not made twice: the write is conditional on
   * the lease, which it cleared (a stop it made is then not mailed, the one thing lost).
   */
  private async outcomeWritten<T>(write: () => Promise<T>): Promise<T> {
    for (const pause of OUTCOME_RETRY_MS) {
      try {
        return await write();
      } catch (error) {
        if (this.stopped || !isUnreachableDependency(error)) throw error;
        await sleep(pause);
      }
    }
    return write();
  }

  /** Drops finished deliveries older than the changes' retention, once a minute. */
  private async cleanup(): Promise<void> {
    if (Date.now() - this.lastCleanup < 60_000) return;
    this.lastCleanup = Date.now();
    await query(
      this.o.orm.em.fork(),
      `delete from delivery where status <> 'pending'
         and finished_at < now() - make_interval(secs => $1)`,
      [this.o.retentionSeconds],
    );
  }
}
