import { logLevel, observabilityEnv, optionalUrl, port } from "@rowbase/kit";
import { z } from "zod";

/**
 * The launcher's own settings. Unset URLs select the embedded pieces: an embedded PostgreSQL
 * under DATA_DIR, an in-memory cache instead of Redis and an in-process bus instead of NATS.
 */
export const standaloneEnv = z.object({
  DATA_DIR: z.string().min(1).default(".rowbase"),
  PORT: port(8080),
  DATABASE_URL: optionalUrl,
  REDIS_URL: optionalUrl,
  NATS_URL: optionalUrl,
  LOG_LEVEL: logLevel,
  /**
   * The services' loopback gRPC ports are this one and the next ones (identity, organization),
   * fixed so that the admin CLI finds the organization service; 0 picks free ports.
   */
  GRPC_BASE_PORT: port(50051),
  /** One `/metrics` (METRICS_PORT) for every service and the gateway, sharing one registry. */
  ...observabilityEnv.shape,
});

export type StandaloneConfig = z.output<typeof standaloneEnv>;
