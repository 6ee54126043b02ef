import { z } from "zod";

/** A configuration value that failed validation; the process should print it and exit 1. */
export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
  }
}

/**
 * Parses environment variables once, listing every problem rather than the first. The only
 * place that reads `process.env` is each process's entry point, which passes it here.
 */
export function parseConfig<S extends z.ZodType>(
  schema: S,
  env: Record<string, string | undefined>,
): z.output<S> {
  const result = schema.safeParse(env);
  if (!result.success) {
    throw new ConfigError(
      result.error.issues.map((issue) => `${issue.path.join(".") || "(root)"}: ${issue.message}`),
    );
  }
  return result.data;
}

const emptyToUndefined = (value: unknown) => (value === "" ? undefined : value);

/** An optional URL variable: unset or empty means "use the embedded stand-in". */
export const optionalUrl = z.preprocess(emptyToUndefined, z.url().optional());

/** Unset, empty or only spaces: the variable is not given. */
const blankToUndefined = (value: unknown) =>
  typeof value === "string" && value.trim() === "" ? undefined : value;

/**
 * A whole-number variable between `min` and `max`; unset, empty or blank takes `fallback` (a
 * bare coercion would read an empty `GRPC_PORT:` of a manifest as 0, a random port).
 */
export function wholeNumber(min: number, max: number, fallback: number) {
  return z.preprocess(
    blankToUndefined,
    z.coerce.number().int().min(min).max(max).default(fallback),
  );
}

/** As `wholeNumber`, without a default: unset, empty or blank is undefined. */
export function optionalWholeNumber(min: number, max: number) {
  return z.preprocess(blankToUndefined, z.coerce.number().int().min(min).max(max).optional());
}

/**
 * DATABASE_POOL_MAX: PostgreSQL connections of a service's pool; unset, kit's default (10 when
 * the service runs alone, fewer in the one-process launcher). Each replica of each service may
 * hold this many, and together they must fit the server's `max_connections`.
 */
export const databasePoolMax = optionalWholeNumber(1, 500);

/**
 * CHANGE_RETENTION_SECONDS: how long a table's record changes are kept (7 days; 1 s to a year).
 * Records keeps its change log that long for the feed, the stream and webhooks; webhooks keeps
 * its finished deliveries as long. One setting, read by both.
 */
export const changeRetentionSeconds = wholeNumber(1, 366 * 24 * 3600, 604_800);

/**
 * SCHEMA_CHANGE_TIMEOUT_SECONDS: how long a schema change that converts stored values (a
 * field's type, options or required flag: POST /field/update) may take, end to end (600 s; 1 s
 * to an hour). One setting, read by each process: catalog waits this long for records'
 * conversion (`CheckFieldTypeChange`, whose deadline is records' too), and the gateway a little
 * longer for catalog (`schemaChangeDeadlines`). Past it the change rolls back whole and the
 * client gets 503.
 */
export const schemaChangeTimeoutSeconds = wholeNumber(1, 3600, 600);

/** A TCP port, 0 meaning "any free port". */
export const port = (fallback: number) => wholeNumber(0, 65535, fallback);

export const logLevel = z
  .enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"])
  .default("info");

/**
 * The address a server binds. Unset, empty or blank: every interface, IPv6 included where the
 * host has it (Node listens on `::`, which takes IPv4 too, and falls back to `0.0.0.0`), so that
 * a pod with only an IPv6 address is reachable; `0.0.0.0` would be IPv4 alone.
 */
export const listenHost = z.preprocess(blankToUndefined, z.string().optional());

/** A secret shared by the gateway and the services; long enough to resist brute force. */
export const secret = z.string().min(32, "must be at least 32 characters");

/** As `secret`, optional: unset, empty or blank is undefined. */
export const optionalSecret = z.preprocess(blankToUndefined, secret.optional());

/** Metrics and traces, read alike by every process (README "Observability"). */
export const observabilityEnv = z.object({
  /** `GET /metrics` for Prometheus on its own HTTP/1.1 port; 0 picks a free one. */
  METRICS_PORT: port(9464),
  /** OTLP/HTTP base URL of a collector (`http://collector:4318`); unset, no span is exported. */
  OTEL_EXPORTER_OTLP_ENDPOINT: optionalUrl,
});

/**
 * What every service reads alike (README "Configuration"); each service's own settings extend
 * it (`z.object({ ...serviceEnv.shape, ... })`).
 */
export const serviceEnv = z.object({
  DATABASE_URL: z.url(),
  DATABASE_POOL_MAX: databasePoolMax,
  REDIS_URL: optionalUrl,
  INTERNAL_JWT_SECRET: secret,
  /** Accepted, never used to sign, while INTERNAL_JWT_SECRET is rotated (README). */
  INTERNAL_JWT_SECRET_PREVIOUS: optionalSecret,
  LOG_LEVEL: logLevel,
  GRPC_HOST: listenHost,
  /** Catalog's wait for a conversion; every service's calls may last that long (README). */
  SCHEMA_CHANGE_TIMEOUT_SECONDS: schemaChangeTimeoutSeconds,
  ...observabilityEnv.shape,
});
