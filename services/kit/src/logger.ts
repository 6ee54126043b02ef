import { pino } from "pino";
import { traceLogFields } from "./tracing.js";

export type Logger = pino.Logger;

/** Where log lines go instead of stdout (tests capture them). */
export type LogDestination = pino.DestinationStream;

/** Paths whose values never reach a log line. */
const redact = [
  "password",
  "*.password",
  "token",
  "*.token",
  "code",
  "*.code",
  "refresh_token",
  "*.refresh_token",
  "access_token",
  "*.access_token",
  "authorization",
  "*.authorization",
  "headers.authorization",
  "req.headers.authorization",
];

/**
 * An error as pino writes it, with its `code` (an errno such as ECONNREFUSED, a SQLSTATE, a gRPC
 * code) also as `error_code`: the redaction of `*.code`, there for verification codes, hides
 * `err.code` too, which is what a line about an unexpected error needs most.
 */
function serializeError(error: unknown): unknown {
  const serialized = pino.stdSerializers.err(error as Error) as unknown as Record<string, unknown>;
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === "string" || typeof code === "number") serialized.error_code = code;
  return serialized;
}

/**
 * JSON logs with the service name on every line, the trace id on every line written while a
 * request is handled (`trace_id`), and secrets redacted. Lines go to stdout asynchronously, off
 * the event loop: written synchronously, each request's line was a write(2) on it, and a log
 * pipe that stalls would stall every request. Lines that arrive while a write is under way go
 * out together with the next one. pino flushes what is left when the process exits; a SIGKILL
 * loses at most the lines not yet written.
 */
export function createLogger(
  service: string,
  level = "info",
  destination?: LogDestination,
): Logger {
  const options: pino.LoggerOptions = {
    name: service,
    level,
    base: { service },
    redact: { paths: redact, censor: "[redacted]" },
    serializers: { err: serializeError },
    mixin: traceLogFields,
  };
  return pino(options, destination ?? pino.destination({ dest: 1, sync: false }));
}
