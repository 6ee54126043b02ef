import { optionalUrl, port, serviceEnv } from "@rowbase/kit";
import { z } from "zod";

export const catalogEnv = z.object({
  ...serviceEnv.shape,
  NATS_URL: optionalUrl,
  GRPC_PORT: port(50053),
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
