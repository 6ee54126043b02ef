import { changeRetentionSeconds, optionalUrl, port, serviceEnv, wholeNumber } from "@rowbase/kit";
import { z } from "zod";
import { AllowedTargets } from "./domain/address-policy.js";
import { DEFAULT_RETRY_SCHEDULE, parseRetrySchedule } from "./domain/retry-schedule.js";

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
  /** Seconds between the attempts of one delivery: N numbers, N retries after the first. */
  WEBHOOK_RETRY_SCHEDULE: parsed(DEFAULT_RETRY_SCHEDULE, parseRetrySchedule),
  /** How long one attempt waits for the whole answer. */
  WEBHOOK_TIMEOUT_MS: wholeNumber(1, 600_000, 10_000),
  /** How often the webhooks' tables are asked for new changes, and due deliveries looked for. */
  WEBHOOK_POLL_MS: wholeNumber(10, 60_000, 250),
  CHANGE_RETENTION_SECONDS: changeRetentionSeconds,
  /** Mail to the owner and admins when a webhook stops after failures. */
  SMTP_URL: optionalUrl,
  MAIL_FROM: z.string().default("Rowbase <no-reply@rowbase.local>"),
});

export type WebhooksConfig = z.output<typeof webhooksEnv>;
