import {
  Authorizer,
  cachedPlan,
  callAs,
  createServiceClient,
  organizationMembershipLookup,
  type RunningService,
  type ServiceDeps,
  schemaChangeDeadlines,
  serveService,
  serviceDatabase,
} from "@rowbase/kit";
import { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { Access } from "./access.js";
import { Transactions } from "./change-set.js";
import type { CatalogConfig } from "./config.js";
import { Databases } from "./databases.js";
import { entities } from "./db/entities.js";
import { Fields } from "./fields.js";
import { Forms } from "./forms.js";
import { migrations } from "./migrations/initial-schema.js";
import { listenForOrganizationDeletion } from "./organization-deletion.js";
import { recordsApply } from "./records-apply.js";
import { createRoutes } from "./server.js";
import { Tables } from "./tables.js";
import { recordsTypeChangeCheck } from "./type-change-check.js";

export const SCHEMA = "catalog";

const database = serviceDatabase(SCHEMA, entities, migrations);
export const createCatalogOrm = database.open;
export const migrateCatalog = database.migrate;

export type RunningCatalog = RunningService;

/**
 * Starts the catalog service on its gRPC port with the given shared pieces: the relay that
 * publishes its outbox, the membership cache evictions (`catalog_membership`) and the
 * organization deletion saga (`catalog_org_deleted`). The caller owns (and closes) the cache
 * and the bus.
 */
export async function startCatalog(
  config: CatalogConfig,
  deps: ServiceDeps,
): Promise<RunningCatalog> {
  const { orm, relay } = await database.openPublishing(config, deps);
  const tx = new Transactions(
    orm,
    relay,
    deps.cache,
    deps.logger,
    config.RECORDS_GRPC_URL
      ? recordsApply(config.RECORDS_GRPC_URL, config.INTERNAL_JWT_SECRET)
      : undefined,
  );
  const organization = createServiceClient(OrganizationService, config.ORGANIZATION_GRPC_URL);
  const authorizer = new Authorizer(
    organizationMembershipLookup(organization, config.INTERNAL_JWT_SECRET, "catalog"),
    deps.cache,
  );
  const access = new Access(authorizer);
  const databases = new Databases({ tx, access });
  const tables = new Tables({ tx, access });
  const fields = new Fields({
    tx,
    access,
    typeChanges: config.RECORDS_GRPC_URL
      ? recordsTypeChangeCheck(
          config.RECORDS_GRPC_URL,
          config.INTERNAL_JWT_SECRET,
          schemaChangeDeadlines(config.SCHEMA_CHANGE_TIMEOUT_SECONDS).conversionMs,
        )
      : undefined,
  });
  // The plan's `forms`, through the plan entry the gateway, records and files share.
  const forms = new Forms({
    tx,
    access,
    allowance: async (organizationId, requestId) => {
      const limits = await cachedPlan(
        deps.cache,
        organizationId,
        async () =>
          organization.getPlan(
            { organizationId },
            await callAs(
              config.INTERNAL_JWT_SECRET,
              { kind: "service", service: "catalog" },
              requestId,
            ),
          ),
        { logger: deps.logger },
      );
      return limits.forms;
    },
  });
  relay.start();
  return serveService(
    config,
    deps.logger,
    { routes: createRoutes({ databases, tables, fields, forms }), services: [CatalogService] },
    {
      consumers: [
        () => authorizer.listen(deps.bus, "catalog_membership"),
        () => listenForOrganizationDeletion(orm, deps.bus, tx, deps.logger),
      ],
      async close() {
        await relay.stop();
        await orm.close();
      },
    },
  );
}
