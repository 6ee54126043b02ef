import {
  type Delivery,
  DeliveryStatus,
  DisabledReason,
  type Webhook,
} from "@rowbase/proto/rowbase/webhooks/v1/webhooks_pb";
import type { z } from "zod";
import { idOf, optionalTimeOf, required, timeOf } from "../../presentation/wire-values.js";
import type {
  DELIVERY_STATUSES,
  DeliverySchema,
  WEBHOOK_EVENTS,
  WebhookSchema,
} from "./webhook-schemas.js";

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

const STATUSES: Record<DeliveryStatus, (typeof DELIVERY_STATUSES)[number] | undefined> = {
  [DeliveryStatus.UNSPECIFIED]: undefined,
  [DeliveryStatus.PENDING]: "pending",
  [DeliveryStatus.SUCCEEDED]: "succeeded",
  [DeliveryStatus.FAILED]: "failed",
};

const STATUS_VALUES = {
  pending: DeliveryStatus.PENDING,
  succeeded: DeliveryStatus.SUCCEEDED,
  failed: DeliveryStatus.FAILED,
} as const;

/** The status a list asks for, as the service takes it. */
export function deliveryStatusValue(
  name: (typeof DELIVERY_STATUSES)[number] | undefined,
): DeliveryStatus {
  return name === undefined ? DeliveryStatus.UNSPECIFIED : STATUS_VALUES[name];
}

export function presentDelivery(delivery: Delivery | undefined): z.output<typeof DeliverySchema> {
  const d = required(delivery, "delivery");
  const status = STATUSES[d.status];
  if (!status) throw new Error(`a delivery of unknown status ${d.status}`);
  return {
    delivery_id: idOf(d.deliveryId),
    webhook_id: idOf(d.webhookId),
    change_id: d.changeId ?? null,
    event: d.event as z.output<typeof DeliverySchema>["event"],
    status,
    attempts: d.attempts,
    response_status: d.responseStatus ?? null,
    error: d.error ?? null,
    duration_ms: d.durationMs ?? null,
    created_at: timeOf(d.createdAt),
    next_attempt_at: optionalTimeOf(d.nextAttemptAt),
  };
}
