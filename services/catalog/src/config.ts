import {
  databasePoolMax,
  listenHost,
  logLevel,
  observabilityEnv,
  optionalSecret,
  optionalUrl,
  port,
  secret,
} from "@rowbase/kit";
import { z } from "zod";

export const catalogEnv = z.object({
  DATABASE_URL: z.url(),
  DATABASE_POOL_MAX: databasePoolMax,
  REDIS_URL: optionalUrl,
  NATS_URL: optionalUrl,
  INTERNAL_JWT_SECRET: secret,
  /** Accepted, never used to sign, while INTERNAL_JWT_SECRET is rotated (README). */
  INTERNAL_JWT_SECRET_PREVIOUS: optionalSecret,
  LOG_LEVEL: logLevel,
  GRPC_HOST: listenHost,
  GRPC_PORT: port(50053),
  ...observabilityEnv.shape,
  /** The organization service, for members' roles (`http://host:port`). */
  ORGANIZATION_GRPC_URL: z.url(),
  /**
   * The records service, asked before a field's type changes whether every stored value
   * converts (RecordsService.CheckFieldTypeChange), and told of such a change that was not
   * committed (ReleaseFieldTypeChange). Unset until records runs: then only the type-change
   * table decides.
   */
  RECORDS_GRPC_URL: optionalUrl,
});

export type CatalogConfig = z.output<typeof catalogEnv>;
