import {
  ConfigError,
  createBus,
  createCache,
  createLogger,
  createServiceClient,
  shutDown,
  startObservability,
} from "@rowbase/kit";
import { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import { FilesService } from "@rowbase/proto/rowbase/files/v1/files_service_pb";
import { IdentityService } from "@rowbase/proto/rowbase/identity/v1/identity_service_pb";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { RecordsService } from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import { WebhooksService } from "@rowbase/proto/rowbase/webhooks/v1/webhooks_service_pb";
import { loadGatewayConfig } from "./config.js";
import { startGateway } from "./start-gateway.js";

/** Runs the gateway alone, configured by environment (as in Kubernetes). */
async function main() {
  const config = loadGatewayConfig();
  const logger = createLogger("gateway", config.LOG_LEVEL);
  const observability = await startObservability({ serviceName: "gateway", config, logger });
  const cache = createCache(config.REDIS_URL);
  const bus = await createBus(config.NATS_URL, logger);
  const identity = createServiceClient(IdentityService, config.IDENTITY_GRPC_URL);
  const organization = createServiceClient(OrganizationService, config.ORGANIZATION_GRPC_URL);
  const catalog = createServiceClient(CatalogService, config.CATALOG_GRPC_URL);
  const records = createServiceClient(RecordsService, config.RECORDS_GRPC_URL);
  const files = createServiceClient(FilesService, config.FILES_GRPC_URL);
  const webhooks = config.WEBHOOKS_GRPC_URL
    ? createServiceClient(WebhooksService, config.WEBHOOKS_GRPC_URL)
    : undefined;
  const gateway = await startGateway({
    config,
    logger,
    cache,
    bus,
    identity,
    organization,
    catalog,
    records,
    files,
    ...(webhooks ? { webhooks } : {}),
    healthTargets: [
      { name: "identity", url: config.IDENTITY_GRPC_URL },
      { name: "organization", url: config.ORGANIZATION_GRPC_URL },
      { name: "catalog", url: config.CATALOG_GRPC_URL },
      { name: "records", url: config.RECORDS_GRPC_URL },
      { name: "files", url: config.FILES_GRPC_URL },
      ...(config.WEBHOOKS_GRPC_URL ? [{ name: "webhooks", url: config.WEBHOOKS_GRPC_URL }] : []),
    ],
  });
  logger.info({ port: gateway.port }, "gateway listening");
  const shutdown = () =>
    shutDown(logger, {
      gateway: () => gateway.close(),
      bus: () => bus.close(),
      cache: () => cache.close(),
      observability: () => observability.close(),
    });
  process.once("SIGTERM", shutdown);
  process.once("SIGINT", shutdown);
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError) {
    process.stderr.write(`${error.message}\n`);
  } else {
    process.stderr.write(`gateway failed to start: ${(error as Error).stack ?? error}\n`);
  }
  process.exit(1);
});
