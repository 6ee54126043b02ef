import {
  databasePoolMax,
  listenHost,
  logLevel,
  observabilityEnv,
  optionalSecret,
  optionalUrl,
  optionalWholeNumber,
  port,
  secret,
} from "@rowbase/kit";
import { z } from "zod";

export const recordsEnv = z.object({
  DATABASE_URL: z.url(),
  DATABASE_POOL_MAX: databasePoolMax,
  REDIS_URL: optionalUrl,
  NATS_URL: optionalUrl,
  INTERNAL_JWT_SECRET: secret,
  /** Accepted, never used to sign, while INTERNAL_JWT_SECRET is rotated (README). */
  INTERNAL_JWT_SECRET_PREVIOUS: optionalSecret,
  LOG_LEVEL: logLevel,
  GRPC_HOST: listenHost,
  GRPC_PORT: port(50054),
  ...observabilityEnv.shape,
  /** The organization service, for members' roles and plans (`http://host:port`). */
  ORGANIZATION_GRPC_URL: z.url(),
  /** The catalog service, for table schemas (`http://host:port`). */
  CATALOG_GRPC_URL: z.url(),
  /**
   * The files service, asked for the live files of the records a response shows
   * (FilesService.ListRecordFiles). Unset until files runs: file fields then show null.
   */
  FILES_GRPC_URL: optionalUrl,
  /**
   * How long PostgreSQL may work on a list's statements (`statement_timeout`); unset: 10 s, the
   * gateway's deadline, past which nobody waits for the answer.
   */
  LIST_TIMEOUT_MS: optionalWholeNumber(1, 600_000),
});

export type RecordsConfig = z.output<typeof recordsEnv>;
