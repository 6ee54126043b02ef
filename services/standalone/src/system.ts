import { catalogEnv, migrateCatalog, startCatalog } from "@rowbase/catalog";
import { gatewayEnv, startGateway } from "@rowbase/gateway";
import { identityEnv, migrateIdentity, startIdentity } from "@rowbase/identity";
import {
  type Cache,
  createBus,
  createCache,
  createLogger,
  createServiceClient,
  type EventBus,
  type Logger,
} from "@rowbase/kit";
import { migrateOrganization, organizationEnv, startOrganization } from "@rowbase/organization";
import { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import { IdentityService } from "@rowbase/proto/rowbase/identity/v1/identity_service_pb";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";

export interface SystemOptions {
  /** Environment for every piece (SMTP_URL, TTLs, RATE_LIMITS, ...), as each service reads it. */
  env: Record<string, string | undefined>;
  databaseUrl: string;
  redisUrl?: string;
  natsUrl?: string;
  internalJwtSecret: string;
  jwtSigningKeys: string;
  /** The gateway's port; 0 picks a free one. */
  port: number;
  /** Loopback gRPC ports of the services (0 or absent: a free one). */
  grpcPorts?: { identity?: number; organization?: number; catalog?: number };
  logger: Logger;
  /** Key prefix in Redis and namespace in NATS, so that several systems can share them. */
  namespace?: string;
}

export interface RunningSystem {
  port: number;
  /** Where each service answers gRPC (for the admin CLI and tests). */
  grpcUrls: { identity: string; organization: string; catalog: string };
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
  const cache = createCache(
    options.redisUrl,
    options.namespace ? `${options.namespace}:` : undefined,
  );
  const bus = await createBus(options.natsUrl, logger, options.namespace);
  const shared = {
    ...options.env,
    DATABASE_URL: options.databaseUrl,
    REDIS_URL: options.redisUrl,
    NATS_URL: options.natsUrl,
    INTERNAL_JWT_SECRET: options.internalJwtSecret,
    GRPC_HOST: "127.0.0.1",
  };
  const grpcPort = (name: keyof NonNullable<SystemOptions["grpcPorts"]>) =>
    String(options.grpcPorts?.[name] ?? 0);

  await migrateIdentity(options.databaseUrl);
  await migrateOrganization(options.databaseUrl);
  await migrateCatalog(options.databaseUrl);
  const identity = await startIdentity(
    identityEnv.parse({
      ...shared,
      GRPC_PORT: grpcPort("identity"),
      JWT_SIGNING_KEYS: options.jwtSigningKeys,
    }),
    { logger: createLogger("identity", logger.level), cache },
  );
  const identityUrl = `http://127.0.0.1:${identity.server.port}`;
  const organization = await startOrganization(
    organizationEnv.parse({
      ...shared,
      GRPC_PORT: grpcPort("organization"),
      IDENTITY_GRPC_URL: identityUrl,
    }),
    { logger: createLogger("organization", logger.level), cache, bus },
  );
  const organizationUrl = `http://127.0.0.1:${organization.server.port}`;
  const catalog = await startCatalog(
    catalogEnv.parse({
      ...shared,
      GRPC_PORT: grpcPort("catalog"),
      ORGANIZATION_GRPC_URL: organizationUrl,
    }),
    { logger: createLogger("catalog", logger.level), cache, bus },
  );
  const catalogUrl = `http://127.0.0.1:${catalog.server.port}`;

  const gateway = await startGateway({
    config: gatewayEnv.parse({
      ...shared,
      PORT: String(options.port),
      IDENTITY_GRPC_URL: identityUrl,
      ORGANIZATION_GRPC_URL: organizationUrl,
      CATALOG_GRPC_URL: catalogUrl,
    }),
    logger: createLogger("gateway", logger.level),
    cache,
    identity: createServiceClient(IdentityService, identityUrl),
    organization: createServiceClient(OrganizationService, organizationUrl),
    catalog: createServiceClient(CatalogService, catalogUrl),
    healthTargets: [
      { name: "identity", url: identityUrl },
      { name: "organization", url: organizationUrl },
      { name: "catalog", url: catalogUrl },
    ],
  });

  return {
    port: gateway.port,
    grpcUrls: { identity: identityUrl, organization: organizationUrl, catalog: catalogUrl },
    cache,
    bus,
    async stop() {
      await gateway.close();
      await catalog.stop();
      await organization.stop();
      await identity.stop();
      await bus.close();
      await cache.close();
    },
  };
}
