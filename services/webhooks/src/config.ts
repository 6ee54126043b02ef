import { optionalUrl, port, serviceEnv } from "@rowbase/kit";
import { z } from "zod";
import { AllowedTargets } from "./domain/address-policy.js";

/** A setting parsed by `parse`, whose error message becomes the setting's problem. */
function parsed<T>(fallback: string, parse: (text: string) => T) {
  return z
    .string()
    .default(fallback)
    .transform((text, ctx) => {
      try {
        return parse(text);
      } catch (error) {
        ctx.addIssue({ code: "custom", message: (error as Error).message });
        return z.NEVER;
      }
    });
}

export const webhooksEnv = z.object({
  ...serviceEnv.shape,
  NATS_URL: optionalUrl,
  GRPC_PORT: port(50056),
  /** The organization service: members' roles, plans, and who to mail when a webhook stops. */
  ORGANIZATION_GRPC_URL: z.url(),
  /** The catalog service: which database and organization a table belongs to. */
  CATALOG_GRPC_URL: z.url(),
  /** The records service: the tables' change logs the webhooks follow. */
  RECORDS_GRPC_URL: z.url(),
  /** Hosts, `host:port`s, addresses and CIDR ranges webhooks may reach although not public. */
  WEBHOOK_ALLOWED_TARGETS: parsed("", AllowedTargets.parse),
});

export type WebhooksConfig = z.output<typeof webhooksEnv>;
