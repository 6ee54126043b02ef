import {
  counterOn,
  gaugeOn,
  histogramOn,
  LATENCY_BUCKETS,
  type MetricsRegistry,
  type Orm,
  processMetricsRegistry,
  query,
} from "@rowbase/kit";

/**
 * Where each registry's queue gauges read from: the database of the service started last on it
 * (a process runs one; tests start another after stopping one).
 */
const sources = new WeakMap<MetricsRegistry, Orm>();

/** What the deliverer records of each attempt, and the queue as the database holds it. */
export function deliveryMetrics(orm: Orm, registry: MetricsRegistry = processMetricsRegistry()) {
  sources.set(registry, orm);
  /** The queue at one scrape, read once for both gauges; the last reading if it fails. */
  let last = { pending: 0, oldestAge: 0 };
  let reading: Promise<{ pending: number; oldestAge: number }> | undefined;
  const queue = () => {
    reading ??= query<{ pending: string; oldest_age: number | null }>(
      (sources.get(registry) ?? orm).em.fork(),
      `select count(*) as pending,
         coalesce(extract(epoch from now() - min(created_at)), 0)::float8 as oldest_age
       from delivery where status = 'pending'`,
    )
      .then(([row]) => {
        last = { pending: Number(row?.pending ?? 0), oldestAge: Number(row?.oldest_age ?? 0) };
        return last;
      })
      .catch(() => last)
      .finally(() => {
        setTimeout(() => {
          reading = undefined;
        }, 100);
      });
    return reading;
  };
  gaugeOn(registry, {
    name: "rowbase_webhook_pending_deliveries",
    help: "Webhook deliveries waiting for an attempt or a retry (the queue depth, over every replica).",
    async collect() {
      this.set((await queue()).pending);
    },
  });
  gaugeOn(registry, {
    name: "rowbase_webhook_oldest_pending_age_seconds",
    help: "Age of the oldest pending webhook delivery, from when its change was queued (0 when none).",
    async collect() {
      this.set((await queue()).oldestAge);
    },
  });
  return {
    attempts: counterOn(registry, {
      name: "rowbase_webhook_delivery_attempts_total",
      help: "Webhook delivery attempts by outcome: succeeded, retry (failed, to be tried again), failed (the delivery's last attempt failed), gone (410: the webhook stopped).",
      labelNames: ["outcome"] as const,
    }),
    duration: histogramOn(registry, {
      name: "rowbase_webhook_attempt_seconds",
      help: "Time of one webhook delivery attempt, connection and answer included, by outcome.",
      labelNames: ["outcome"] as const,
      buckets: LATENCY_BUCKETS,
    }),
  };
}

export type DeliveryMetrics = ReturnType<typeof deliveryMetrics>;
