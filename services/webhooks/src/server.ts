import type { ConnectRouter, HandlerContext } from "@connectrpc/connect";
import { type Call, requestIdOf, requireUser } from "@rowbase/kit";
import { WebhooksService } from "@rowbase/proto/rowbase/webhooks/v1/webhooks_service_pb";
import type { Webhooks } from "./webhooks.js";
import { statusFromProto, toDelivery, toWebhook } from "./wire.js";

export interface WebhooksServerDeps {
  webhooks: Webhooks;
}

/** Webhooks are managed with a member's session only, never with an API token. */
function callOf(ctx: HandlerContext): Call {
  return { principal: requireUser(ctx), requestId: requestIdOf(ctx) };
}

/** The webhooks handlers: proto in, rule, proto out. */
export function createRoutes({ webhooks }: WebhooksServerDeps) {
  return (router: ConnectRouter) =>
    router.service(WebhooksService, {
      async createWebhook(req, ctx) {
        const { webhook, secret } = await webhooks.create(callOf(ctx), req.tableId, {
          url: req.url,
          events: req.events,
          where: req.where,
          description: req.description,
          active: req.active,
        });
        return { webhook: toWebhook(webhook), secret };
      },

      async listWebhooks(req, ctx) {
        const list = await webhooks.list(callOf(ctx), req.tableId);
        return { webhooks: list.map(toWebhook) };
      },

      async getWebhook(req, ctx) {
        return { webhook: toWebhook(await webhooks.get(callOf(ctx), req.webhookId)) };
      },

      async updateWebhook(req, ctx) {
        const webhook = await webhooks.update(callOf(ctx), req.webhookId, {
          url: req.url,
          events: req.eventsGiven ? req.events : undefined,
          where: req.where,
          description: req.description,
          active: req.active,
        });
        return { webhook: toWebhook(webhook) };
      },

      async deleteWebhook(req, ctx) {
        await webhooks.delete(callOf(ctx), req.webhookId);
        return {};
      },

      async rotateWebhookSecret(req, ctx) {
        const { webhook, secret } = await webhooks.rotateSecret(callOf(ctx), req.webhookId);
        return { webhook: toWebhook(webhook), secret };
      },

      async testWebhook(req, ctx) {
        return { delivery: toDelivery(await webhooks.test(callOf(ctx), req.webhookId)) };
      },

      async listDeliveries(req, ctx) {
        const page = await webhooks.deliveries(callOf(ctx), req.webhookId, {
          limit: req.limit,
          offset: req.offset,
          status: statusFromProto(req.status),
        });
        return { deliveries: page.deliveries.map(toDelivery), total: BigInt(page.total) };
      },

      async redeliver(req, ctx) {
        return { delivery: toDelivery(await webhooks.redeliver(callOf(ctx), req.deliveryId)) };
      },
    });
}
