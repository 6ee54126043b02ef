import { DisabledReason, type Webhook } from "@rowbase/proto/rowbase/webhooks/v1/webhooks_pb";
import type { z } from "zod";
import { idOf, optionalTimeOf, required, timeOf } from "../../presentation/wire-values.js";
import type { WEBHOOK_EVENTS, WebhookSchema } from "./webhook-schemas.js";

const REASONS = {
  [DisabledReason.UNSPECIFIED]: null,
  [DisabledReason.FAILURES]: "failures",
  [DisabledReason.GONE]: "gone",
} as const;

/** A webhook as the API shows it: never its secret. */
export function presentWebhook(webhook: Webhook | undefined): z.output<typeof WebhookSchema> {
  const w = required(webhook, "webhook");
  return {
    webhook_id: idOf(w.webhookId),
    organization_id: idOf(w.organizationId),
    database_id: idOf(w.databaseId),
    table_id: idOf(w.tableId),
    url: w.url,
    events: w.events as (typeof WEBHOOK_EVENTS)[number][],
    where: w.where ?? null,
    description: w.description,
    active: w.active,
    disabled_reason: REASONS[w.disabledReason] ?? null,
    consecutive_failures: w.consecutiveFailures,
    last_delivery_at: optionalTimeOf(w.lastDeliveryAt),
    created_at: timeOf(w.createdAt),
    updated_at: timeOf(w.updatedAt),
  };
}
