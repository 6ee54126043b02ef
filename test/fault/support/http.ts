/** One answer of the gateway, as the fault tests look at it. */
export interface Answer {
  /** The HTTP status; 0 when no answer came (connection refused or reset, time-out). */
  status: number;
  /** `message` of the JSON envelope (the error code of a failure). */
  code: string | undefined;
  // biome-ignore lint/suspicious/noExplicitAny: tests inspect response bodies freely
  data: any;
  ms: number;
}

export interface CallOptions {
  token?: string | undefined;
  json?: unknown;
  form?: FormData;
  timeoutMs?: number;
}

/** A request that never throws: whatever happened is in the answer. */
export async function call(
  baseUrl: string,
  method: string,
  pathAndQuery: string,
  options: CallOptions = {},
): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  if (options.json !== undefined) headers["content-type"] = "application/json";
  const started = performance.now();
  try {
    const response = await fetch(new URL(pathAndQuery, baseUrl), {
      method,
      headers,
      body: options.form ?? (options.json === undefined ? undefined : JSON.stringify(options.json)),
      signal: AbortSignal.timeout(options.timeoutMs ?? 30_000),
    });
    const text = await response.text();
    let body: { message?: string; data?: unknown } | undefined;
    if (response.headers.get("content-type")?.startsWith("application/json")) {
      body = JSON.parse(text) as { message?: string; data?: unknown };
    }
    return {
      status: response.status,
      code: body?.message,
      data: body?.data,
      ms: performance.now() - started,
    };
  } catch (error) {
    return {
      status: 0,
      code: String((error as Error).message ?? error),
      data: undefined,
      ms: performance.now() - started,
    };
  }
}

/** What a route answered during a load loop, in order. */
export interface Outcome extends Answer {
  route: string;
  at: number;
}

/**
 * Runs `operations` round-robin, `concurrency` at a time, until `stop()`; every answer is kept.
 * An operation returns the answer it got (and may note what it created on the side).
 */
export function loadLoop(
  operations: Record<string, () => Promise<Answer>>,
  concurrency = 4,
): { outcomes: Outcome[]; stop(): Promise<void>; since(at: number): Outcome[] } {
  const outcomes: Outcome[] = [];
  const names = Object.keys(operations);
  let running = true;
  let turn = 0;
  const worker = async () => {
    while (running) {
      const route = names[turn++ % names.length]!;
      const answer = await operations[route]!();
      outcomes.push({ ...answer, route, at: Date.now() });
      // A little breathing room, so that a refused connection does not spin.
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  };
  const workers = Array.from({ length: concurrency }, worker);
  return {
    outcomes,
    since: (at) => outcomes.filter((outcome) => outcome.at >= at),
    async stop() {
      running = false;
      await Promise.all(workers);
    },
  };
}

/** Calls `probe` until it answers `status` (default 2xx); fails after `ms`. */
export async function until(
  what: string,
  probe: () => Promise<Answer>,
  accept: (answer: Answer) => boolean = (answer) => answer.status >= 200 && answer.status < 300,
  ms = 60_000,
): Promise<Answer> {
  const deadline = Date.now() + ms;
  let last: Answer | undefined;
  while (Date.now() < deadline) {
    last = await probe();
    if (accept(last)) return last;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`${what}: not reached within ${ms} ms; last answer ${JSON.stringify(last)}`);
}

export const ok = (answer: Answer) => answer.status >= 200 && answer.status < 300;
export const unavailable = (answer: Answer) =>
  answer.status === 503 && answer.code === "service_unavailable";

/** `route status code` counts, for failure messages. */
export function tally(outcomes: Outcome[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const outcome of outcomes) {
    const key = `${outcome.route} ${outcome.status} ${outcome.status >= 300 ? outcome.code : ""}`;
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
}
