import type { Client } from "@connectrpc/connect";
import type { WebhooksService } from "@rowbase/proto/rowbase/webhooks/v1/webhooks_service_pb";
import { countOf } from "../../presentation/wire-values.js";
import { defineRoute, type Route } from "../../routing/route.js";
import { deliveryStatusValue, presentDelivery, presentWebhook } from "./webhook-presenters.js";
import {
  DeliveryGetSchema,
  DeliveryIdQuery,
  DeliveryListQuery,
  DeliveryListSchema,
  WebhookCreateSchema,
  WebhookGetSchema,
  WebhookIdQuery,
  WebhookListSchema,
  WebhookSecretSchema,
  WebhookTableQuery,
  WebhookUpdateSchema,
} from "./webhook-schemas.js";

export interface WebhookRoutesDeps {
  webhooks: Client<typeof WebhooksService>;
}

const tags = ["Webhooks"];

/**
 * Webhooks of tables (docs/webhooks.md). Management routes: a session only; the owner or an
 * admin manages them, any member reads them. A webhook or table of another organization is
 * not found.
 */
export function webhookRoutes({ webhooks }: WebhookRoutesDeps): Route[] {
  return [
    defineRoute({
      method: "POST",
      path: "/webhook/create",
      operationId: "webhookCreate",
      summary: "Create a webhook of a table; its signing secret is returned this once",
      tags,
      auth: "session",
      rateLimits: ["org_write_user"],
      query: WebhookTableQuery,
      body: WebhookCreateSchema,
      response: WebhookSecretSchema,
      errors: [
        "table_not_found",
        "organization_forbidden",
        "webhook_url_forbidden",
        "webhook_limit_exceeded",
      ],
      async handle({ query, body, call }) {
        const response = await webhooks.createWebhook(
          {
            tableId: query.table_id,
            url: body.url,
            events: body.events ?? [],
            where: body.where,
            description: body.description ?? "",
            active: body.active,
          },
          call,
        );
        return { webhook: presentWebhook(response.webhook), secret: response.secret };
      },
    }),
    defineRoute({
      method: "GET",
      path: "/webhook/list",
      operationId: "webhookList",
      summary: "The table's webhooks, oldest first, without their secrets",
      tags,
      auth: "session",
      query: WebhookTableQuery,
      response: WebhookListSchema,
      errors: ["table_not_found"],
      async handle({ query, call }) {
        const response = await webhooks.listWebhooks({ tableId: query.table_id }, call);
        return { webhooks: response.webhooks.map((webhook) => presentWebhook(webhook)) };
      },
    }),
    defineRoute({
      method: "GET",
      path: "/webhook/get",
      operationId: "webhookGet",
      summary: "A webhook, without its secret",
      tags,
      auth: "session",
      query: WebhookIdQuery,
      response: WebhookGetSchema,
      errors: ["webhook_not_found"],
      async handle({ query, call }) {
        const response = await webhooks.getWebhook({ webhookId: query.webhook_id }, call);
        return { webhook: presentWebhook(response.webhook) };
      },
    }),
    defineRoute({
      method: "POST",
      path: "/webhook/update",
      operationId: "webhookUpdate",
      summary: "Change a webhook's URL, events, filter, description, or switch it on or off",
      tags,
      auth: "session",
      query: WebhookIdQuery,
      body: WebhookUpdateSchema,
      response: WebhookGetSchema,
      errors: ["webhook_not_found", "organization_forbidden", "webhook_url_forbidden"],
      async handle({ query, body, call }) {
        const response = await webhooks.updateWebhook(
          {
            webhookId: query.webhook_id,
            url: body.url,
            events: body.events ?? [],
            eventsGiven: body.events !== undefined,
            where: body.where === null ? "" : body.where,
            description: body.description,
            active: body.active,
          },
          call,
        );
        return { webhook: presentWebhook(response.webhook) };
      },
    }),
    defineRoute({
      method: "POST",
      path: "/webhook/delete",
      operationId: "webhookDelete",
      summary: "Delete a webhook with its delivery log",
      tags,
      auth: "session",
      query: WebhookIdQuery,
      errors: ["webhook_not_found", "organization_forbidden"],
      async handle({ query, call }) {
        await webhooks.deleteWebhook({ webhookId: query.webhook_id }, call);
        return {};
      },
    }),
    defineRoute({
      method: "POST",
      path: "/webhook/rotate_secret",
      operationId: "webhookRotateSecret",
      summary: "Give a webhook a new signing secret; the old one keeps signing for 24 hours",
      tags,
      auth: "session",
      query: WebhookIdQuery,
      response: WebhookSecretSchema,
      errors: ["webhook_not_found", "organization_forbidden"],
      async handle({ query, call }) {
        const response = await webhooks.rotateWebhookSecret({ webhookId: query.webhook_id }, call);
        return { webhook: presentWebhook(response.webhook), secret: response.secret };
      },
    }),
    defineRoute({
      method: "POST",
      path: "/webhook/test",
      operationId: "webhookTest",
      summary: "Send a webhook.test event once, and answer its delivery",
      description:
        "One attempt, made before the answer and never retried; it changes nothing of the " +
        'webhook. The body is `{"type": "webhook.test", "webhook_id", "at"}`, signed as ' +
        "every delivery is.",
      tags,
      auth: "session",
      query: WebhookIdQuery,
      response: DeliveryGetSchema,
      errors: ["webhook_not_found", "organization_forbidden"],
      async handle({ query, call }) {
        const response = await webhooks.testWebhook({ webhookId: query.webhook_id }, call);
        return { delivery: presentDelivery(response.delivery) };
      },
    }),
    defineRoute({
      method: "GET",
      path: "/webhook/deliveries",
      operationId: "webhookDeliveries",
      summary: "A webhook's deliveries, newest first, kept as long as the table's changes",
      tags,
      auth: "session",
      query: DeliveryListQuery,
      response: DeliveryListSchema,
      errors: ["webhook_not_found"],
      async handle({ query, call }) {
        const response = await webhooks.listDeliveries(
          {
            webhookId: query.webhook_id,
            limit: query.limit,
            offset: query.offset,
            status: deliveryStatusValue(query.status),
          },
          call,
        );
        return {
          deliveries: response.deliveries.map((delivery) => presentDelivery(delivery)),
          total: countOf(response.total),
        };
      },
    }),
    defineRoute({
      method: "POST",
      path: "/webhook/redeliver",
      operationId: "webhookRedeliver",
      summary: "Send a delivery's change again, with the same webhook-id",
      description:
        "A new delivery, queued now after the pending deliveries of the same record, with the " +
        "same body and `webhook-id` (receivers that keep the ids they saw can drop it).",
      tags,
      auth: "session",
      query: DeliveryIdQuery,
      response: DeliveryGetSchema,
      errors: ["delivery_not_found", "organization_forbidden"],
      async handle({ query, call }) {
        const response = await webhooks.redeliver({ deliveryId: query.delivery_id }, call);
        return { delivery: presentDelivery(response.delivery) };
      },
    }),
  ];
}
