import { catalogEnv, migrateCatalog, startCatalog } from "@rowbase/catalog";
import { filesEnv, migrateFiles, startFiles } from "@rowbase/files";
import { gatewayEnv, startGateway } from "@rowbase/gateway";
import { identityEnv, migrateIdentity, startIdentity } from "@rowbase/identity";
import {
  type Cache,
  createBus,
  createCache,
  createLogger,
  createServiceClient,
  type EventBus,
  freePort,
  type LogDestination,
  type Logger,
  MemoryBus,
  setDefaultPoolMax,
} from "@rowbase/kit";
import { migrateOrganization, organizationEnv, startOrganization } from "@rowbase/organization";
import { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import { FilesService } from "@rowbase/proto/rowbase/files/v1/files_service_pb";
import { IdentityService } from "@rowbase/proto/rowbase/identity/v1/identity_service_pb";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { RecordsService } from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import { migrateRecords, recordsEnv, startRecords } from "@rowbase/records";

export interface SystemOptions {
  /** Environment for every piece (SMTP_URL, TTLs, RATE_LIMITS, ...), as each service reads it. */
  env: Record<string, string | undefined>;
  databaseUrl: string;
  redisUrl?: string;
  natsUrl?: string;
  internalJwtSecret: string;
  /** Signs file URLs (FILE_URL_SECRET). */
  fileUrlSecret: string;
  /** Where the files service keeps bytes unless FILES_DIR or S3_* say otherwise. */
  filesDir: string;
  jwtSigningKeys: string;
  /** The gateway's port; 0 picks a free one. */
  port: number;
  /** Loopback gRPC ports of the services (0 or absent: a free one). */
  grpcPorts?: {
    identity?: number;
    organization?: number;
    catalog?: number;
    records?: number;
    files?: number;
  };
  logger: Logger;
  /** Where every process's log lines go instead of stdout (tests read them). */
  logDestination?: LogDestination;
  /** Key prefix in Redis and namespace in NATS, so that several systems can share them. */
  namespace?: string;
}

export interface RunningSystem {
  port: number;
  /** Where each service answers gRPC (for the admin CLI and tests). */
  grpcUrls: {
    identity: string;
    organization: string;
    catalog: string;
    records: string;
    files: string;
  };
  cache: Cache;
  bus: EventBus;
  stop(): Promise<void>;
}

/**
 * Every service and the gateway in one process. Each service listens on its own loopback gRPC
 * port and the gateway calls it over gRPC, exactly as the separate deployments do.
 */
export async function startSystem(options: SystemOptions): Promise<RunningSystem> {
  const { logger } = options;
  setDefaultPoolMax(4);
  const processLogger = (name: string) => createLogger(name, logger.level, options.logDestination);
  const cache = createCache(
    options.redisUrl,
    options.namespace ? `${options.namespace}:` : undefined,
  );
  const bus = await createBus(options.natsUrl, logger, options.namespace);
  // In-process, nothing is kept for a consumer that subscribes later: events wait until every
  // service has subscribed.
  if (bus instanceof MemoryBus) bus.hold();
  const shared = {
    ...options.env,
    DATABASE_URL: options.databaseUrl,
    REDIS_URL: options.redisUrl,
    NATS_URL: options.natsUrl,
    INTERNAL_JWT_SECRET: options.internalJwtSecret,
    GRPC_HOST: "127.0.0.1",
  };
  // Every port is settled before anything starts, because the services call each other in
  // both directions (catalog asks records about type changes, records asks catalog for schemas).
  const ports = {
    identity: options.grpcPorts?.identity || (await freePort()),
    organization: options.grpcPorts?.organization || (await freePort()),
    catalog: options.grpcPorts?.catalog || (await freePort()),
    records: options.grpcPorts?.records || (await freePort()),
    files: options.grpcPorts?.files || (await freePort()),
  };
  const grpcPort = (name: keyof typeof ports) => String(ports[name]);
  const identityUrl = `http://127.0.0.1:${ports.identity}`;
  const organizationUrl = `http://127.0.0.1:${ports.organization}`;
  const catalogUrl = `http://127.0.0.1:${ports.catalog}`;
  const recordsUrl = `http://127.0.0.1:${ports.records}`;
  const filesUrl = `http://127.0.0.1:${ports.files}`;

  await migrateIdentity(options.databaseUrl);
  await migrateOrganization(options.databaseUrl);
  await migrateCatalog(options.databaseUrl);
  await migrateRecords(options.databaseUrl);
  await migrateFiles(options.databaseUrl);
  const identity = await startIdentity(
    identityEnv.parse({
      ...shared,
      GRPC_PORT: grpcPort("identity"),
      JWT_SIGNING_KEYS: options.jwtSigningKeys,
    }),
    { logger: processLogger("identity"), cache },
  );
  const organization = await startOrganization(
    organizationEnv.parse({
      ...shared,
      GRPC_PORT: grpcPort("organization"),
      IDENTITY_GRPC_URL: identityUrl,
      CATALOG_GRPC_URL: catalogUrl,
      RECORDS_GRPC_URL: recordsUrl,
      FILES_GRPC_URL: filesUrl,
    }),
    { logger: processLogger("organization"), cache, bus },
  );
  const catalog = await startCatalog(
    catalogEnv.parse({
      ...shared,
      GRPC_PORT: grpcPort("catalog"),
      ORGANIZATION_GRPC_URL: organizationUrl,
      RECORDS_GRPC_URL: recordsUrl,
    }),
    { logger: processLogger("catalog"), cache, bus },
  );
  const records = await startRecords(
    recordsEnv.parse({
      ...shared,
      GRPC_PORT: grpcPort("records"),
      ORGANIZATION_GRPC_URL: organizationUrl,
      CATALOG_GRPC_URL: catalogUrl,
      FILES_GRPC_URL: filesUrl,
    }),
    { logger: processLogger("records"), cache, bus },
  );
  const files = await startFiles(
    filesEnv.parse({
      ...shared,
      GRPC_PORT: grpcPort("files"),
      ORGANIZATION_GRPC_URL: organizationUrl,
      CATALOG_GRPC_URL: catalogUrl,
      RECORDS_GRPC_URL: recordsUrl,
      FILE_URL_SECRET: options.fileUrlSecret,
      FILES_DIR: options.env.FILES_DIR ?? options.filesDir,
    }),
    { logger: processLogger("files"), cache, bus },
  );

  const gateway = await startGateway({
    config: gatewayEnv.parse({
      ...shared,
      PORT: String(options.port),
      IDENTITY_GRPC_URL: identityUrl,
      ORGANIZATION_GRPC_URL: organizationUrl,
      CATALOG_GRPC_URL: catalogUrl,
      RECORDS_GRPC_URL: recordsUrl,
      FILES_GRPC_URL: filesUrl,
    }),
    logger: processLogger("gateway"),
    cache,
    identity: createServiceClient(IdentityService, identityUrl),
    organization: createServiceClient(OrganizationService, organizationUrl),
    catalog: createServiceClient(CatalogService, catalogUrl),
    records: createServiceClient(RecordsService, recordsUrl),
    files: createServiceClient(FilesService, filesUrl),
    bus,
    healthTargets: [
      { name: "identity", url: identityUrl },
      { name: "organization", url: organizationUrl },
      { name: "catalog", url: catalogUrl },
      { name: "records", url: recordsUrl },
      { name: "files", url: filesUrl },
    ],
  });

  if (bus instanceof MemoryBus) bus.release();
  return {
    port: gateway.port,
    grpcUrls: {
      identity: identityUrl,
      organization: organizationUrl,
      catalog: catalogUrl,
      records: recordsUrl,
      files: filesUrl,
    },
    cache,
    bus,
    async stop() {
      await gateway.close();
      await files.stop();
      await records.stop();
      await catalog.stop();
      await organization.stop();
      await identity.stop();
      await bus.close();
      await cache.close();
    },
  };
}
