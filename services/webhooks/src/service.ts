import {
  Authorizer,
  createServiceClient,
  organizationMembershipLookup,
  type RunningService,
  type ServiceDeps,
  serveService,
  serviceDatabase,
} from "@rowbase/kit";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { WebhooksService } from "@rowbase/proto/rowbase/webhooks/v1/webhooks_service_pb";
import { Transactions } from "./change-set.js";
import type { WebhooksConfig } from "./config.js";
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
 * outbox (audit events) and the membership cache evictions. The caller owns (and closes) the
 * cache and the bus.
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
  const webhooks = new Webhooks({
    tx,
    authorizer,
    upstream,
    allowed: config.WEBHOOK_ALLOWED_TARGETS,
  });
  relay.start();
  return serveService(
    config,
    deps.logger,
    { routes: createRoutes({ webhooks }), services: [WebhooksService] },
    {
      consumers: [() => authorizer.listen(deps.bus, "webhooks_membership")],
      async close() {
        await relay.stop();
        await orm.close();
      },
    },
  );
}
