import {
  createServiceClient,
  type RunningService,
  type ServiceDeps,
  serveService,
  serviceDatabase,
} from "@rowbase/kit";
import { createMailer } from "@rowbase/kit/mailer";
import { IdentityService } from "@rowbase/proto/rowbase/identity/v1/identity_service_pb";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { ApiTokens } from "./api-tokens.js";
import { AuditLog } from "./audit-log.js";
import { catalogScopeOwners } from "./audit-scope-owners.js";
import { Transactions } from "./change-set.js";
import type { OrganizationConfig } from "./config.js";
import { entities } from "./db/entities.js";
import { startEventConsumers } from "./event-consumers.js";
import { Invites } from "./invites.js";
import { Members } from "./members.js";
import { migrations } from "./migrations/initial-schema.js";
import { Organizations } from "./organizations.js";
import { recordsUsageLookup } from "./record-usage.js";
import { createRoutes } from "./server.js";
import { filesStorageUsageLookup } from "./storage-usage.js";
import { UsageStats } from "./usage-stats.js";
import { UserDirectory } from "./user-directory.js";

export const SCHEMA = "organization";

/** How long PostgreSQL may work on an audit list by default: the gateway's deadline. */
const LIST_TIMEOUT_MS = 10_000;

const database = serviceDatabase(SCHEMA, entities, migrations);
export const createOrganizationOrm = database.open;
export const migrateOrganization = database.migrate;

export interface RunningOrganization extends RunningService {
  /** The audit store, for its retention job (tests run it at a chosen time). */
  auditLog: AuditLog;
}

/**
 * Starts the organization service on its gRPC port with the given shared pieces, and the relay
 * that publishes its outbox to the bus. The caller owns (and closes) the cache and the bus.
 */
export async function startOrganization(
  config: OrganizationConfig,
  deps: ServiceDeps,
): Promise<RunningOrganization> {
  // The audit list reads on a pool of its own whose connections carry the list timeout (kit).
  const { orm, relay, read, closeLists } = await database.openPublishingWithLists(
    config,
    deps,
    config.LIST_TIMEOUT_MS ?? LIST_TIMEOUT_MS,
  );
  const mailer = createMailer(config.SMTP_URL, config.MAIL_FROM, deps.logger);
  const tx = new Transactions(orm, relay, deps.cache, deps.logger);
  const directory = new UserDirectory(
    createServiceClient(IdentityService, config.IDENTITY_GRPC_URL),
    config.INTERNAL_JWT_SECRET,
  );
  relay.start();
  const auditLog = new AuditLog({
    tx,
    owners: config.CATALOG_GRPC_URL
      ? catalogScopeOwners(config.CATALOG_GRPC_URL, config.INTERNAL_JWT_SECRET)
      : undefined,
    logger: deps.logger,
    read,
  });
  const usage = new UsageStats({ tx, logger: deps.logger });
  const service = await serveService(
    config,
    deps.logger,
    {
      routes: createRoutes({
        organizations: new Organizations({
          tx,
          recordUsage: config.RECORDS_GRPC_URL
            ? recordsUsageLookup(config.RECORDS_GRPC_URL, config.INTERNAL_JWT_SECRET)
            : undefined,
          storageUsage: config.FILES_GRPC_URL
            ? filesStorageUsageLookup(config.FILES_GRPC_URL, config.INTERNAL_JWT_SECRET)
            : undefined,
        }),
        invites: new Invites({ tx, directory, mailer, logger: deps.logger, config }),
        members: new Members({ tx, directory, mailer, config }),
        apiTokens: new ApiTokens({ tx }),
        auditLog,
        usage,
      }),
      services: [OrganizationService],
    },
    {
      consumers: [
        () => startEventConsumers({ orm, bus: deps.bus, logger: deps.logger, auditLog, usage }),
      ],
      async close() {
        await relay.stop();
        mailer.close();
        await orm.close();
        await closeLists();
      },
    },
  );
  return { ...service, auditLog };
}
