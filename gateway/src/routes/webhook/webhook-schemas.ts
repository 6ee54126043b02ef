import { z } from "zod";
import { requestBody, responseData } from "../../routing/api-schemas.js";
import { description, oneOf, queryId } from "../../validation/fields.js";
import { once, queryInteger } from "../../validation/query-values.js";

/** The change types a webhook may be sent. */
export const WEBHOOK_EVENTS = ["record.created", "record.updated", "record.deleted"] as const;

const WEBHOOK_URL_MAX_LENGTH = 2048;
const WHERE_MAX_LENGTH = 4000;

/** Query parameters of the webhook routes. */

export const WebhookTableQuery = z.strictObject({
  table_id: queryId.describe("The table whose record changes the webhooks are sent"),
});

export const WebhookIdQuery = z.strictObject({ webhook_id: queryId.describe("The webhook") });

export const DELIVERY_STATUSES = ["pending", "succeeded", "failed"] as const;

/** ListDeliveriesRequest.offset is an int32. */
const OFFSET_MAX = 2_147_483_647;

export const DeliveryListQuery = z.strictObject({
  webhook_id: queryId.describe("The webhook"),
  limit: queryInteger(1, 100, 20).describe("Deliveries in the page"),
  offset: queryInteger(0, OFFSET_MAX, 0).describe("Deliveries to skip, newest first"),
  status: z
    .preprocess(once, oneOf(DELIVERY_STATUSES))
    .optional()
    .describe("Only deliveries in this status"),
});

export const DeliveryIdQuery = z.strictObject({ delivery_id: queryId.describe("The delivery") });

/** Request bodies, under their published schema names. */

const url = z
  .string()
  .min(1, `must be 1-${WEBHOOK_URL_MAX_LENGTH} characters`)
  .max(WEBHOOK_URL_MAX_LENGTH, `must be 1-${WEBHOOK_URL_MAX_LENGTH} characters`)
  .describe(
    "An absolute `https` (or `http`) URL without credentials. A literal address that is not " +
      "public (loopback, private, link-local, CGNAT, multicast, reserved) is refused with " +
      "`webhook_url_forbidden`; a name is checked on the address it resolves to at each attempt",
  );

const events = z
  .array(z.enum(WEBHOOK_EVENTS))
  .min(1, "must name at least one change type")
  .max(3)
  .describe("The change types sent; without it, all three");

const where = z
  .string()
  .max(WHERE_MAX_LENGTH, `must be at most ${WHERE_MAX_LENGTH} characters`)
  .describe(
    "A filter of the query language on the record after the change (before it, for a " +
      "deletion); only matching changes are sent. Empty: every change",
  );

const active = z
  .boolean()
  .describe(
    "false pauses the webhook; true enables it again, from the present end of the table's " +
      "changes (the changes made meanwhile are not sent)",
  );

export const WebhookCreateSchema = requestBody(
  "WebhookCreateSchema",
  z.strictObject({
    url,
    events: events.optional(),
    where: where.optional(),
    description: description.optional(),
    active: active.optional(),
  }),
  "The webhook starts at the present end of the table's changes.",
);

export const WebhookUpdateSchema = requestBody(
  "WebhookUpdateSchema",
  z.strictObject({
    url: url.optional(),
    events: events.optional(),
    where: where.nullable().optional(),
    description: description.optional(),
    active: active.optional(),
  }),
  "Keys left out keep their value; `where` null or empty removes the filter.",
);

/** Response `data` of the webhook routes. */

const id = z.number().int();
const time = z.iso.datetime();

export const WebhookSchema = responseData(
  "Webhook",
  z.object({
    webhook_id: id,
    organization_id: id,
    database_id: id,
    table_id: id,
    url: z.string(),
    events: z.array(z.enum(WEBHOOK_EVENTS)),
    where: z.string().nullable().describe("null when every change is sent"),
    description: z.string(),
    active: z.boolean(),
    disabled_reason: z
      .enum(["failures", "gone"])
      .nullable()
      .describe(
        "Why the webhook stopped on its own: `failures` (a delivery failed for good, or 50 " +
          "attempts in a row failed), `gone` (the receiver answered 410); null otherwise",
      ),
    consecutive_failures: z.number().int().describe("Attempts failed in a row"),
    last_delivery_at: time.nullable().describe("The last attempt; null before the first"),
    created_at: time,
    updated_at: time,
  }),
);

export const WebhookGetSchema = responseData("WebhookGet", z.object({ webhook: WebhookSchema }));

export const WebhookListSchema = responseData(
  "WebhookList",
  z.object({ webhooks: z.array(WebhookSchema).describe("Oldest first") }),
);

export const WebhookSecretSchema = responseData(
  "WebhookSecret",
  z.object({
    webhook: WebhookSchema,
    secret: z
      .string()
      .describe("The signing secret, `whsec_` and the base64 of 32 random bytes; shown only here"),
  }),
);

export const DeliverySchema = responseData(
  "Delivery",
  z.object({
    delivery_id: id,
    webhook_id: id,
    change_id: z.string().nullable().describe("The change's cursor; null for a test event"),
    event: z
      .enum([...WEBHOOK_EVENTS, "webhook.test"])
      .describe("The change's type, or `webhook.test`"),
    status: z
      .enum(DELIVERY_STATUSES)
      .describe(
        "`pending` until an attempt got a 2xx answer (`succeeded`) or the last retry failed " +
          "(`failed`); a delivery of a webhook that stopped fails too",
      ),
    attempts: z.number().int(),
    response_status: z
      .number()
      .int()
      .nullable()
      .describe("The last attempt's HTTP status; null when no answer came"),
    error: z
      .string()
      .nullable()
      .describe(
        "Why the last attempt got no answer: `address_forbidden`, `timeout`, " +
          "`connection_failed` or `invalid_url`; `webhook_disabled` when its webhook stopped",
      ),
    duration_ms: z.number().int().nullable().describe("The last attempt's duration"),
    created_at: time,
    next_attempt_at: time.nullable().describe("When the next attempt is due; null once finished"),
  }),
);

export const DeliveryGetSchema = responseData(
  "DeliveryGet",
  z.object({ delivery: DeliverySchema }),
);

export const DeliveryListSchema = responseData(
  "DeliveryList",
  z.object({
    deliveries: z.array(DeliverySchema).describe("Newest first"),
    total: z
      .number()
      .int()
      .min(0)
      .describe("Every delivery that matches, ignoring limit and offset"),
  }),
);
