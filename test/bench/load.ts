import { performance } from "node:perf_hooks";
import autocannon from "autocannon";
import type pg from "pg";

export interface Measured {
  /** Completed requests (or raw operations) per second. */
  rps: number;
  p50_ms: number;
  p99_ms: number;
  /** Non-2xx answers, connection errors and timeouts (for raw: failed operations). */
  errors: number;
  /** What the errors were: status counts and the first answers' bodies. */
  errorDetail: string[];
}

/** Stops whatever load is running (the run's time limit or a signal). */
export class Abort {
  aborted = false;
  private readonly stops = new Set<() => void>();

  onAbort(stop: () => void): () => void {
    this.stops.add(stop);
    return () => this.stops.delete(stop);
  }

  abort(): void {
    this.aborted = true;
    for (const stop of this.stops) stop();
  }
}

export interface HttpLoad {
  url: string;
  connections: number;
  seconds: number;
  requests: autocannon.Request[];
  /** Stops after this many requests, if the duration has not ended first. */
  maxRequests?: number;
}

/** Drives the gateway with autocannon (HTTP/1.1 keep-alive, one request in flight per connection). */
export function driveHttp(load: HttpLoad, abort: Abort): Promise<Measured> {
  const samples: string[] = [];
  const requests = load.requests.map((request) => ({
    ...request,
    onResponse: (status: number, body: string) => {
      if ((status < 200 || status > 299) && samples.length < 3) {
        samples.push(`${status} ${body.slice(0, 300)}`);
      }
    },
  }));
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: load.url,
        connections: load.connections,
        duration: load.seconds,
        timeout: 30,
        requests,
        ...(load.maxRequests ? { maxOverallRequests: load.maxRequests } : {}),
      },
      (error, result) => {
        removeAbort();
        if (error) return reject(error);
        const codes = Object.entries(result.statusCodeStats)
          .filter(([code]) => !code.startsWith("2"))
          .map(([code, { count }]) => `${count} x ${code}`);
        if (result.errors > 0)
          codes.push(`${result.errors} connection errors (${result.timeouts} timeouts)`);
        resolve({
          rps: result.duration > 0 ? result.requests.total / result.duration : 0,
          p50_ms: result.latency.p50,
          p99_ms: result.latency.p99,
          errors: result.non2xx + result.errors,
          errorDetail: [...codes, ...samples],
        });
      },
    );
    const removeAbort = abort.onAbort(() => instance.stop());
  });
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/**
 * Runs `operation` from `concurrency` loops for `seconds`, each taking a connection of `pool`
 * for one operation as the service's pool does; the ceiling of a scenario.
 */
export async function driveRaw(
  pool: pg.Pool,
  concurrency: number,
  seconds: number,
  operation: (client: pg.PoolClient) => Promise<void>,
  abort: Abort,
): Promise<Measured> {
  const latencies: number[] = [];
  const failures: string[] = [];
  let errors = 0;
  const started = performance.now();
  const end = started + seconds * 1000;
  const loop = async () => {
    while (performance.now() < end && !abort.aborted) {
      const t0 = performance.now();
      const client = await pool.connect();
      try {
        await operation(client);
        latencies.push(performance.now() - t0);
      } catch (error) {
        errors += 1;
        if (failures.length < 3) failures.push((error as Error).message);
      } finally {
        client.release();
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  const elapsed = (performance.now() - started) / 1000;
  const sorted = Float64Array.from(latencies).sort();
  return {
    rps: latencies.length / elapsed,
    p50_ms: percentile(sorted, 50),
    p99_ms: percentile(sorted, 99),
    errors,
    errorDetail: failures,
  };
}
