import type { ApiToken } from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import type { z } from "zod";
import { tokenAccessName } from "../../presentation/organization-enums.js";
import { idOf, optionalTimeOf, required, timeOf } from "../../presentation/wire-values.js";
import type { ApiTokenSchema } from "./api-token-schemas.js";

/** An API token as listed: never its secret; `last_used_at` is null until it is first used. */
export function presentApiToken(token: ApiToken | undefined): z.output<typeof ApiTokenSchema> {
  const t = required(token, "api_token");
  return {
    token_id: idOf(t.tokenId),
    name: t.name,
    access: tokenAccessName(t.access),
    token_prefix: t.tokenPrefix,
    created_at: timeOf(t.createdAt),
    last_used_at: optionalTimeOf(t.lastUsedAt),
  };
}
