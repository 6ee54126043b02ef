import {
  Authorizer,
  createServiceClient,
  organizationMembershipLookup,
  type RunningService,
  type ServiceDeps,
  serveService,
  serviceDatabase,
} from "@rowbase/kit";
import { createMailer } from "@rowbase/kit/mailer";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { WebhooksService } from "@rowbase/proto/rowbase/webhooks/v1/webhooks_service_pb";
import { Transactions } from "./change-set.js";
import type { WebhooksConfig } from "./config.js";
import { Deliverer, stopWebhook } from "./delivery/deliverer.js";
import { Follower } from "./delivery/follower.js";
import { deliveryMetrics } from "./delivery/metrics.js";
import { Notifier } from "./delivery/notifier.js";
import { migrations } from "./migrations/initial-schema.js";
import { createRoutes } from "./server.js";
import { Upstream } from "./upstream.js";
import { Webhooks } from "./webhooks.js";

export const SCHEMA = "webhooks";

/**
 * The webhooks ORM maps no entity of its own: the service works on its rows through
 * parameterised SQL (`db/`); the ORM gives it connections, transactions and migrations.
 */
const database = serviceDatabase(SCHEMA, [], migrations);
export const createWebhooksOrm = database.open;
export const migrateWebhooks = database.migrate;

export type RunningWebhooks = RunningService;

/**
 * Starts the webhooks service on its gRPC port with the given shared pieces: the relay of its
 * outbox (audit events), the membership cache evictions, the follower of the webhooks' change
 * logs and the deliverer. The caller owns (and closes) the cache and the bus.
 */
export async function startWebhooks(
  config: WebhooksConfig,
  deps: ServiceDeps,
): Promise<RunningWebhooks> {
  const { orm, relay } = await database.openPublishing(config, deps);
  const tx = new Transactions(orm, relay, deps.logger);
  const authorizer = new Authorizer(
    organizationMembershipLookup(
      createServiceClient(OrganizationService, config.ORGANIZATION_GRPC_URL),
      config.INTERNAL_JWT_SECRET,
      "webhooks",
    ),
    deps.cache,
  );
  const upstream = new Upstream(
    {
      records: config.RECORDS_GRPC_URL,
      catalog: config.CATALOG_GRPC_URL,
      organization: config.ORGANIZATION_GRPC_URL,
    },
    config.INTERNAL_JWT_SECRET,
    deps.cache,
    deps.logger,
  );
  const mailer = createMailer(config.SMTP_URL, config.MAIL_FROM, deps.logger);
  const notifier = new Notifier({
    organizations: upstream.organizations,
    internalSecret: config.INTERNAL_JWT_SECRET,
    mailer,
    logger: deps.logger,
  });
  const deliverer = new Deliverer({
    orm,
    logger: deps.logger,
    allowed: config.WEBHOOK_ALLOWED_TARGETS,
    timeoutMs: config.WEBHOOK_TIMEOUT_MS,
    schedule: config.WEBHOOK_RETRY_SCHEDULE,
    pollMs: config.WEBHOOK_POLL_MS,
    retentionSeconds: config.CHANGE_RETENTION_SECONDS,
    stopped: (webhook) => notifier.webhookStopped(webhook),
    metrics: deliveryMetrics(orm),
  });
  const follower = new Follower({
    orm,
    upstream,
    logger: deps.logger,
    pollMs: config.WEBHOOK_POLL_MS,
    queued: () => deliverer.wake(),
    async broken(webhookId) {
      const stopped = await orm.em
        .fork()
        .transactional((em) => stopWebhook(em, webhookId, "failures"));
      if (stopped) await notifier.webhookStopped(stopped);
    },
  });
  const webhooks = new Webhooks({
    tx,
    authorizer,
    upstream,
    allowed: config.WEBHOOK_ALLOWED_TARGETS,
    timeoutMs: config.WEBHOOK_TIMEOUT_MS,
    queued: () => deliverer.wake(),
  });
  relay.start();
  follower.start();
  deliverer.start();
  return serveService(
    config,
    deps.logger,
    { routes: createRoutes({ webhooks }), services: [WebhooksService] },
    {
      consumers: [() => authorizer.listen(deps.bus, "webhooks_membership")],
      async close() {
        await follower.stop();
        await deliverer.stop();
        mailer.close();
        await relay.stop();
        await orm.close();
      },
    },
  );
}
