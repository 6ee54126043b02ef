import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  type Delivery,
  DeliverySchema,
  DeliveryStatus,
  DisabledReason,
  type Webhook,
  WebhookSchema,
} from "@rowbase/proto/rowbase/webhooks/v1/webhooks_pb";
import type { DeliveryRow } from "./db/delivery-row.js";
import type { WebhookRow } from "./db/webhook-row.js";

const REASONS = {
  failures: DisabledReason.FAILURES,
  gone: DisabledReason.GONE,
} as const;

/** A webhook as the API gives it: never its secret or its cursor. */
export function toWebhook(row: WebhookRow): Webhook {
  return create(WebhookSchema, {
    webhookId: row.id,
    organizationId: row.organizationId,
    databaseId: row.databaseId,
    tableId: row.tableId,
    url: row.url,
    events: row.events,
    ...(row.where === null ? {} : { where: row.where }),
    description: row.description,
    active: row.active,
    disabledReason: row.disabledReason ? REASONS[row.disabledReason] : DisabledReason.UNSPECIFIED,
    consecutiveFailures: row.consecutiveFailures,
    ...(row.lastDeliveryAt ? { lastDeliveryAt: timestampFromDate(row.lastDeliveryAt) } : {}),
    createdAt: timestampFromDate(row.createdAt),
    updatedAt: timestampFromDate(row.updatedAt),
  });
}

const STATUSES = {
  pending: DeliveryStatus.PENDING,
  succeeded: DeliveryStatus.SUCCEEDED,
  failed: DeliveryStatus.FAILED,
} as const;

/** The status a list asks for; undefined for every status. */
export function statusFromProto(status: DeliveryStatus): DeliveryRow["status"] | undefined {
  return (Object.keys(STATUSES) as DeliveryRow["status"][]).find(
    (name) => STATUSES[name] === status,
  );
}

export function toDelivery(row: DeliveryRow): Delivery {
  return create(DeliverySchema, {
    deliveryId: row.id,
    webhookId: row.webhookId,
    ...(row.changeId === null ? {} : { changeId: row.changeId }),
    event: row.event,
    status: STATUSES[row.status],
    attempts: row.attempts,
    ...(row.responseStatus === null ? {} : { responseStatus: row.responseStatus }),
    ...(row.error === null ? {} : { error: row.error }),
    ...(row.durationMs === null ? {} : { durationMs: row.durationMs }),
    createdAt: timestampFromDate(row.createdAt),
    ...(row.nextAttemptAt ? { nextAttemptAt: timestampFromDate(row.nextAttemptAt) } : {}),
  });
}
