import { gatewayEnv, startGateway } from "@rowbase/gateway";
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
import { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import { FilesService } from "@rowbase/proto/rowbase/files/v1/files_service_pb";
import { IdentityService } from "@rowbase/proto/rowbase/identity/v1/identity_service_pb";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { RecordsService } from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import { WebhooksService } from "@rowbase/proto/rowbase/webhooks/v1/webhooks_service_pb";
import {
  grpcUrlsOf,
  type RunningServices,
  SERVICE_NAMES,
  SERVICES,
  type ServiceName,
} from "./services.js";

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
  grpcPorts?: Partial<Record<ServiceName, number>>;
  logger: Logger;
  /** Where every process's log lines go instead of stdout (tests read them). */
  logDestination?: LogDestination;
  /** Key prefix in Redis and namespace in NATS, so that several systems can share them. */
  namespace?: string;
}

export interface RunningSystem {
  port: number;
  /** Where each service answers gRPC (for the admin CLI and tests). */
  grpcUrls: Record<ServiceName, string>;
  cache: Cache;
  bus: EventBus;
  /** Stops one service ahead of the rest (a test of what its absence does). */
  stopService(name: ServiceName): Promise<void>;
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
  const ports = {} as Record<ServiceName, number>;
  const urls = {} as Record<ServiceName, string>;
  for (const name of SERVICE_NAMES) {
    ports[name] = options.grpcPorts?.[name] || (await freePort());
    urls[name] = `http://127.0.0.1:${ports[name]}`;
  }
  const own: Record<ServiceName, Record<string, string | undefined>> = {
    identity: { JWT_SIGNING_KEYS: options.jwtSigningKeys },
    organization: {},
    catalog: {},
    records: {},
    files: {
      FILE_URL_SECRET: options.fileUrlSecret,
      FILES_DIR: options.env.FILES_DIR ?? options.filesDir,
    },
    webhooks: {},
  };
  const start = <K extends ServiceName>(name: K): Promise<RunningServices[K]> => {
    const piece = SERVICES[name];
    const config = piece.env.parse({
      ...shared,
      GRPC_PORT: String(ports[name]),
      ...grpcUrlsOf(name, urls),
      ...own[name],
    });
    return piece.start(config, { logger: processLogger(name), cache, bus });
  };

  for (const name of SERVICE_NAMES) await SERVICES[name].migrate(options.databaseUrl);
  const running = new Map<ServiceName, { stop(): Promise<void> }>();
  for (const name of SERVICE_NAMES) running.set(name, await start(name));

  const gateway = await startGateway({
    config: gatewayEnv.parse({
      ...shared,
      PORT: String(options.port),
      IDENTITY_GRPC_URL: urls.identity,
      ORGANIZATION_GRPC_URL: urls.organization,
      CATALOG_GRPC_URL: urls.catalog,
      RECORDS_GRPC_URL: urls.records,
      FILES_GRPC_URL: urls.files,
      WEBHOOKS_GRPC_URL: urls.webhooks,
    }),
    logger: processLogger("gateway"),
    cache,
    identity: createServiceClient(IdentityService, urls.identity),
    organization: createServiceClient(OrganizationService, urls.organization),
    catalog: createServiceClient(CatalogService, urls.catalog),
    records: createServiceClient(RecordsService, urls.records),
    files: createServiceClient(FilesService, urls.files),
    webhooks: createServiceClient(WebhooksService, urls.webhooks),
    bus,
    healthTargets: SERVICE_NAMES.map((name) => ({ name, url: urls[name] })),
  });

  if (bus instanceof MemoryBus) bus.release();
  return {
    port: gateway.port,
    grpcUrls: urls,
    cache,
    bus,
    async stopService(name) {
      const service = running.get(name);
      running.delete(name);
      await service?.stop();
    },
    async stop() {
      await gateway.close();
      for (const service of [...running.values()].reverse()) await service.stop();
      await bus.close();
      await cache.close();
    },
  };
}
