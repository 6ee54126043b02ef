import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  DisabledReason,
  type Webhook,
  WebhookSchema,
} from "@rowbase/proto/rowbase/webhooks/v1/webhooks_pb";
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
