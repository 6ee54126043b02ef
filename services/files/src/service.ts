import {
  Authorizer,
  createServiceClient,
  organizationMembershipLookup,
  type RunningService,
  type ServiceDeps,
  serveService,
  serviceDatabase,
} from "@rowbase/kit";
import { FilesService } from "@rowbase/proto/rowbase/files/v1/files_service_pb";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { Access } from "./access.js";
import { Transactions } from "./change-set.js";
import { Cleanup } from "./cleanup.js";
import { type FilesConfig, storageSettingsOf } from "./config.js";
import { Files } from "./files.js";
import { DURABLES, listen } from "./listeners.js";
import { Maintenance, type MaintenanceOptions } from "./maintenance.js";
import { migrations } from "./migrations/initial-schema.js";
import { createRoutes } from "./server.js";
import { type BlobStore, createBlobStore } from "./storage/index.js";
import { streamingErrorsInterceptor } from "./streaming.js";
import { Upstream } from "./upstream.js";

export const SCHEMA = "files";

/**
 * The files ORM maps no entity of its own: files works on its rows in sets and conditional
 * statements through parameterised SQL (`db/stored-file.ts`, `db/scopes.ts`); the ORM gives it
 * connections, transactions and migrations.
 */
const database = serviceDatabase(SCHEMA, [], migrations);
export const createFilesOrm = database.open;
export const migrateFiles = database.migrate;

export interface RunningFiles extends RunningService {
  /** The blob store in use (`directory` or `s3`). */
  blobs: BlobStore;
  /** Runs one round of the scheduled purge and byte collection now. */
  maintain(): Promise<{ purged: number; collected: number }>;
}

export interface FilesOptions {
  /** The scheduled purge and byte collection (default: every minute). */
  maintenance?: MaintenanceOptions;
}

/**
 * Starts the files service on its gRPC port with the given shared pieces: the outbox relay, the
 * membership cache evictions, the catalog, organization and records event consumers, and the
 * maintenance job. The caller owns (and closes) the cache and the bus.
 */
export async function startFiles(
  config: FilesConfig,
  deps: ServiceDeps,
  options: FilesOptions = {},
): Promise<RunningFiles> {
  const { orm, relay } = await database.openPublishing(config, deps);
  const blobs = createBlobStore(storageSettingsOf(config));
  let maintenance: Maintenance | undefined;
  const tx = new Transactions(orm, relay, deps.logger, () => maintenance?.kick());
  maintenance = new Maintenance(orm, tx, blobs, deps.logger, options.maintenance);
  const authorizer = new Authorizer(
    organizationMembershipLookup(
      createServiceClient(OrganizationService, config.ORGANIZATION_GRPC_URL),
      config.INTERNAL_JWT_SECRET,
      "files",
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
  const files = new Files({
    tx,
    access: new Access(upstream, authorizer),
    upstream,
    blobs,
    urlSecret: config.FILE_URL_SECRET,
    urlTtlSeconds: config.FILE_URL_TTL_SECONDS,
    logger: deps.logger,
  });
  relay.start();
  maintenance.start();
  const running = maintenance;
  const service = await serveService(
    config,
    deps.logger,
    {
      routes: createRoutes({ files }),
      services: [FilesService],
      interceptors: [streamingErrorsInterceptor(deps.logger)],
    },
    {
      consumers: [
        () => authorizer.listen(deps.bus, DURABLES.membership),
        () => listen(orm, deps.bus, { cleanup: new Cleanup(tx), upstream, logger: deps.logger }),
      ],
      async close() {
        await running.stop();
        await relay.stop();
        await blobs.close();
        await orm.close();
      },
    },
  );
  return { ...service, blobs, maintain: () => running.runOnce() };
}
