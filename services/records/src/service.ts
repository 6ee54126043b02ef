import { join } from "node:path";
import {
  Authorizer,
  createServiceClient,
  organizationMembershipLookup,
  packageDirectory,
  type RunningService,
  type ServiceDeps,
  serveService,
  serviceDatabase,
} from "@rowbase/kit";
import { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import { FilesService } from "@rowbase/proto/rowbase/files/v1/files_service_pb";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { RecordsService } from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import { Access } from "./access.js";
import { CatalogEvents } from "./catalog-events.js";
import { ChangeLog, ChangeRetention, ChangeSequencer } from "./change-log.js";
import { Transactions } from "./change-set.js";
import type { RecordsConfig } from "./config.js";
import { recordUsage } from "./db/create-gate.js";
import { TableIndexes } from "./db/user-tables/indexes.js";
import { StoredTables } from "./db/user-tables/registry.js";
import { allocateRowIds, RowIdBlock } from "./db/writes.js";
import { FileValues } from "./file-values.js";
import { migrations } from "./migrations/initial-schema.js";
import { listenForOrganizationDeletion } from "./organization-events.js";
import { Plans } from "./plans.js";
import { Records } from "./records.js";
import { createRoutes } from "./server.js";
import { TableSchemas } from "./table-schema.js";
import { TypeChanges } from "./type-changes.js";
import { catalogSchemaOf, catalogTableIds, Upgrade } from "./upgrade.js";

export const SCHEMA = "records";

/** How long PostgreSQL may work on a list by default: the gateway's deadline. */
const LIST_TIMEOUT_MS = 10_000;

/**
 * The records ORM. It maps no entity of its own (besides kit's outbox): records lives in jsonb,
 * conditional updates and set-based statements, all through parameterised SQL; the ORM gives it
 * connections, transactions and migrations. The SQL functions of the write path, one file each
 * in the package's `sql/` folder, are applied after the migrations whenever a file changes.
 */
const database = serviceDatabase(SCHEMA, [], migrations, {
  sql: join(packageDirectory(import.meta.url), "sql"),
});
export const createRecordsOrm = database.open;
export const migrateRecords = database.migrate;

export type RunningRecords = RunningService;

/**
 * Starts the records service on its gRPC port with the given shared pieces: the relay that
 * publishes its outbox, and its consumers — membership cache evictions (`records_membership`),
 * catalog changes (`records_catalog`), plan changes (`records_plan`) and the organization
 * deletion saga (`records_org_deleted`). The caller owns (and closes) the cache and the bus.
 */
export async function startRecords(
  config: RecordsConfig,
  deps: ServiceDeps,
): Promise<RunningRecords> {
  // Lists read on a pool of their own whose connections carry the list timeout (kit).
  const { orm, relay, read, closeLists } = await database.openPublishingWithLists(
    config,
    deps,
    config.LIST_TIMEOUT_MS ?? LIST_TIMEOUT_MS,
  );
  // A commit that wrote record changes also wakes the sequencer, which gives them positions.
  const sequencer = new ChangeSequencer(orm, deps.logger, config.CHANGE_SEQUENCE_INTERVAL_MS);
  const retention = new ChangeRetention(
    orm,
    deps.logger,
    config.CHANGE_RETENTION_SECONDS,
    Math.min(60_000, Math.max(1_000, config.CHANGE_RETENTION_SECONDS * 250)),
  );
  const tx = new Transactions(
    orm,
    {
      kick(committed) {
        relay.kick(committed);
        sequencer.kick();
      },
    },
    deps.logger,
  );
  const organizations = createServiceClient(OrganizationService, config.ORGANIZATION_GRPC_URL);
  const catalog = createServiceClient(CatalogService, config.CATALOG_GRPC_URL);
  const authorizer = new Authorizer(
    organizationMembershipLookup(organizations, config.INTERNAL_JWT_SECRET, "records"),
    deps.cache,
  );
  const schemas = new TableSchemas(catalog, deps.cache, config.INTERNAL_JWT_SECRET, deps.logger);
  const plans = new Plans(organizations, deps.cache, config.INTERNAL_JWT_SECRET, deps.logger);
  const files = new FileValues(
    config.FILES_GRPC_URL ? createServiceClient(FilesService, config.FILES_GRPC_URL) : undefined,
    config.INTERNAL_JWT_SECRET,
  );
  const tables = new StoredTables(() => tx.em());
  // A field index's build holds a connection of the ORM's pool while it lasts: with only one
  // connection there, writes would wait for it, so no field index is built.
  const indexes =
    (orm.config.get("pool")?.max ?? 0) >= 2
      ? new TableIndexes({
          em: orm.em,
          schemaOf: (tableId) => schemas.fresh(tableId),
          logger: deps.logger,
        })
      : undefined;
  const access = new Access(schemas, authorizer);
  const records = new Records({
    tx,
    access,
    plans,
    files,
    read,
    tables,
    indexes,
    rowIds: new RowIdBlock(allocateRowIds),
  });
  const typeChanges = new TypeChanges(tx, tables);
  const catalogEvents = new CatalogEvents({
    orm,
    schemas,
    typeChanges,
    tables,
    logger: deps.logger,
  });
  // Tables made before the per-table storage move out of `record` in the background, one at a
  // time, on one replica at a time, and then `record` is dropped (docs/records-storage.md,
  // step 6); unless this replica is told not to run it.
  const upgrade = new Upgrade({
    em: orm.em,
    schemaOf: catalogSchemaOf(schemas),
    tableIdsAfter: catalogTableIds(catalog, config.INTERNAL_JWT_SECRET),
    logger: deps.logger,
  });
  const changeLog = new ChangeLog({ orm, access, sequencer });
  relay.start();
  if (config.STORAGE_UPGRADE === "on") upgrade.start();
  sequencer.start();
  retention.start();
  return serveService(
    config,
    deps.logger,
    {
      routes: createRoutes({
        records,
        changeLog,
        typeChanges,
        usage: (organizationId) => recordUsage(tx.em(), organizationId),
        applyCatalogEvent: (message) => catalogEvents.handle(message),
      }),
      services: [RecordsService],
    },
    {
      consumers: [
        () => authorizer.listen(deps.bus, "records_membership"),
        () => catalogEvents.listen(deps.bus),
        () => plans.listen(deps.bus),
        () =>
          listenForOrganizationDeletion(orm, deps.bus, { cache: deps.cache, logger: deps.logger }),
      ],
      async close() {
        await upgrade.stop();
        await indexes?.close();
        await relay.stop();
        await sequencer.stop();
        await retention.stop();
        await orm.close();
        await closeLists();
      },
    },
  );
}
