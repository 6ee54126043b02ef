/**
 * Whether an error says that something a service depends on cannot be reached right now
 * (PostgreSQL restarting or away, a connection cut, Redis away), as opposed to a fault of the
 * request or the code: such an error is gRPC Unavailable (the gateway's 503
 * `service_unavailable`: retry later), never Internal (500). Looks through the error's causes,
 * since MikroORM and ioredis wrap the driver's error.
 */
export function isUnreachableDependency(error: unknown): boolean {
  return someCause(error, (current) => {
    const { code, name, message } = current as Error & { code?: unknown };
    if (typeof code === "string" && (UNREACHABLE_CODES.has(code) || code.startsWith("08"))) {
      return true;
    }
    if (name === "ConnectionException" || name === "MaxRetriesPerRequestError") return true;
    return UNREACHABLE_MESSAGES.test(message);
  });
}

/**
 * Whether PostgreSQL gave a transaction up to let another one through (a deadlock, a
 * serialization failure): nothing is wrong with the request, and the same call made again
 * normally succeeds, so it is Unavailable (503, try again) rather than Internal.
 */
export function isTransientConflict(error: unknown): boolean {
  return someCause(error, (current) => {
    const { code } = current as Error & { code?: unknown };
    return code === "40001" || code === "40P01";
  });
}

/**
 * Whether PostgreSQL cancelled a statement (57014: its `statement_timeout`, or a cancel
 * request): the work took longer than anybody waits, gRPC DeadlineExceeded rather than Internal.
 */
export function isCancelledStatement(error: unknown): boolean {
  return hasSqlState(error, "57014");
}

/**
 * Whether a statement waited for a lock longer than its `lock_timeout` (55P03,
 * lock_not_available): a write of a table whose values are being converted waits at most that
 * long for the table's write lock (records' `write_gate`), so that a write its client gave up
 * on is never applied later. Nothing was written; the same call later normally goes through.
 */
export function isLockNotAvailable(error: unknown): boolean {
  return hasSqlState(error, "55P03");
}

/** Whether PostgreSQL refused a statement with this SQLSTATE (the error or one of its causes). */
export function hasSqlState(error: unknown, state: string): boolean {
  return someCause(error, (current) => (current as Error & { code?: unknown }).code === state);
}

/** Whether `test` holds for the error or one of its causes (MikroORM and ioredis wrap them). */
function someCause(error: unknown, test: (error: Error) => boolean): boolean {
  const seen = new Set<unknown>();
  let current: unknown = error;
  while (current instanceof Error && !seen.has(current)) {
    seen.add(current);
    if (test(current)) return true;
    if (current instanceof AggregateError && current.errors.some((e) => someCause(e, test))) {
      return true;
    }
    current = current.cause;
  }
  return false;
}

/**
 * Socket errors, and PostgreSQL's SQLSTATEs for a server that is going down, starting up or
 * full (class 08, connection exceptions, is matched by its prefix).
 */
const UNREACHABLE_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  // admin_shutdown, crash_shutdown, cannot_connect_now, too_many_connections
  "57P01",
  "57P02",
  "57P03",
  "53300",
]);

/**
 * What node-postgres, its pool and ioredis say without a code when a connection goes away
 * (node-postgres's client says "timeout expired" when opening one takes too long).
 */
const UNREACHABLE_MESSAGES =
  /^timeout expired$|Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Redis unavailable|Stream isn't writeable|Connection is closed|Command timed out/i;
