import { writeFile } from "node:fs/promises";
import { Session } from "node:inspector/promises";
import path from "node:path";
import {
  type Cache,
  ConfigError,
  createBus,
  createCache,
  createLogger,
  createServiceClient,
  type EventBus,
  type Logger,
  parseConfig,
  startObservability,
} from "@rowbase/kit";
import { PIECES, type Piece } from "./pieces.js";

/**
 * One piece of Rowbase as its own process, the way its `src/main.ts` runs it in Kubernetes
 * (config from the environment, the same start function, SIGTERM to stop), with one difference:
 * the Redis key prefix and the NATS namespace come from BENCH_NAMESPACE, so that a benchmark run
 * shares the servers with nobody and can remove everything it wrote. The entry points have no
 * variable for these yet; were they to get one, the benchmark could run `main.js` itself. Each
 * process imports only its own piece, as its `main.ts` does, so that its memory is what a pod's
 * would be.
 *
 * Usage: `node service-process.js <identity|organization|catalog|records|files|webhooks|gateway>`,
 * started by the benchmark with an IPC channel: it answers `{type: "ready"}` once listening and
 * stops when the benchmark goes away.
 */

interface Running {
  stop(): Promise<void>;
}

/** What each `main.ts` does between parsing its config and listening. */
async function start(piece: Piece, env: NodeJS.ProcessEnv, namespace: string): Promise<Running> {
  const prefix = `${namespace}:`;
  const withCache = async (
    config: { LOG_LEVEL: string; REDIS_URL?: string | undefined },
    observe: { METRICS_PORT: number; OTEL_EXPORTER_OTLP_ENDPOINT?: string | undefined } | undefined,
  ) => {
    const logger = createLogger(piece, config.LOG_LEVEL);
    const observability = observe
      ? await startObservability({ serviceName: piece, config: observe, logger, host: "127.0.0.1" })
      : undefined;
    return { logger, cache: createCache(config.REDIS_URL, prefix), observability };
  };
  const finish = async (
    parts: { cache: Cache; observability?: { close(): Promise<void> } | undefined },
    stop: () => Promise<void>,
    bus?: EventBus,
  ): Promise<Running> => ({
    async stop() {
      await stop();
      await bus?.close();
      await parts.cache.close();
      await parts.observability?.close();
    },
  });
  const busFor = (url: string | undefined, logger: Logger) => createBus(url, logger, namespace);

  switch (piece) {
    case "identity": {
      const { identityEnv, startIdentity } = await import("@rowbase/identity");
      const config = parseConfig(identityEnv, env);
      const parts = await withCache(config, config);
      const service = await startIdentity(config, parts);
      return finish(parts, () => service.stop());
    }
    case "organization": {
      const { organizationEnv, startOrganization } = await import("@rowbase/organization");
      const config = parseConfig(organizationEnv, env);
      const parts = await withCache(config, config);
      const bus = await busFor(config.NATS_URL, parts.logger);
      const service = await startOrganization(config, { ...parts, bus });
      return finish(parts, () => service.stop(), bus);
    }
    case "catalog": {
      const { catalogEnv, startCatalog } = await import("@rowbase/catalog");
      const config = parseConfig(catalogEnv, env);
      const parts = await withCache(config, config);
      const bus = await busFor(config.NATS_URL, parts.logger);
      const service = await startCatalog(config, { ...parts, bus });
      return finish(parts, () => service.stop(), bus);
    }
    case "records": {
      const { recordsEnv, startRecords } = await import("@rowbase/records");
      const config = parseConfig(recordsEnv, env);
      // records' main.ts starts no metrics server while its config has no METRICS_PORT.
      const observe = "METRICS_PORT" in config ? (config as never) : undefined;
      const parts = await withCache(config, observe);
      const bus = await busFor(config.NATS_URL, parts.logger);
      const service = await startRecords(config, { ...parts, bus });
      return finish(parts, () => service.stop(), bus);
    }
    case "files": {
      const { filesEnv, startFiles } = await import("@rowbase/files");
      const config = parseConfig(filesEnv, env);
      const parts = await withCache(config, config);
      const bus = await busFor(config.NATS_URL, parts.logger);
      const service = await startFiles(config, { ...parts, bus });
      return finish(parts, () => service.stop(), bus);
    }
    case "webhooks": {
      const { webhooksEnv, startWebhooks } = await import("@rowbase/webhooks");
      const config = parseConfig(webhooksEnv, env);
      const parts = await withCache(config, config);
      const bus = await busFor(config.NATS_URL, parts.logger);
      const service = await startWebhooks(config, { ...parts, bus });
      return finish(parts, () => service.stop(), bus);
    }
    case "gateway": {
      const { loadGatewayConfig, startGateway } = await import("@rowbase/gateway");
      const { CatalogService } = await import(
        "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb"
      );
      const { FilesService } = await import("@rowbase/proto/rowbase/files/v1/files_service_pb");
      const { IdentityService } = await import(
        "@rowbase/proto/rowbase/identity/v1/identity_service_pb"
      );
      const { OrganizationService } = await import(
        "@rowbase/proto/rowbase/organization/v1/organization_service_pb"
      );
      const { RecordsService } = await import(
        "@rowbase/proto/rowbase/records/v1/records_service_pb"
      );
      const { WebhooksService } = await import(
        "@rowbase/proto/rowbase/webhooks/v1/webhooks_service_pb"
      );
      const config = loadGatewayConfig(env);
      const parts = await withCache(config, config);
      const bus = await busFor(config.NATS_URL, parts.logger);
      const gateway = await startGateway(
        {
          config,
          logger: parts.logger,
          cache: parts.cache,
          bus,
          identity: createServiceClient(IdentityService, config.IDENTITY_GRPC_URL),
          organization: createServiceClient(OrganizationService, config.ORGANIZATION_GRPC_URL),
          catalog: createServiceClient(CatalogService, config.CATALOG_GRPC_URL),
          records: createServiceClient(RecordsService, config.RECORDS_GRPC_URL),
          files: createServiceClient(FilesService, config.FILES_GRPC_URL),
          ...(config.WEBHOOKS_GRPC_URL
            ? { webhooks: createServiceClient(WebhooksService, config.WEBHOOKS_GRPC_URL) }
            : {}),
          healthTargets: [
            { name: "identity", url: config.IDENTITY_GRPC_URL },
            { name: "organization", url: config.ORGANIZATION_GRPC_URL },
            { name: "catalog", url: config.CATALOG_GRPC_URL },
            { name: "records", url: config.RECORDS_GRPC_URL },
            { name: "files", url: config.FILES_GRPC_URL },
            ...(config.WEBHOOKS_GRPC_URL
              ? [{ name: "webhooks", url: config.WEBHOOKS_GRPC_URL }]
              : []),
          ],
        },
        { host: "127.0.0.1" },
      );
      return finish(parts, () => gateway.close(), bus);
    }
  }
}

/**
 * With a directory, samples every allocation from now on (those collected since included, which
 * V8's own `--heap-prof` leaves out) through the inspector, and `write` saves the profile there,
 * to open in Chrome DevTools' Memory tab.
 */
async function sampleAllocations(piece: Piece, dir: string | undefined) {
  if (!dir) return undefined;
  const session = new Session();
  session.connect();
  await session.post("HeapProfiler.startSampling", {
    samplingInterval: 16 * 1024,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  return {
    async write() {
      const { profile } = await session.post("HeapProfiler.stopSampling");
      const name = `${piece}-${new Date().toISOString().replace(/[:.]/g, "-")}.heapprofile`;
      await writeFile(path.join(dir, name), JSON.stringify(profile));
    },
  };
}

async function main() {
  const piece = process.argv[2] as Piece;
  if (!PIECES.includes(piece)) throw new Error(`usage: service-process <${PIECES.join("|")}>`);
  const namespace = process.env.BENCH_NAMESPACE;
  if (!namespace || !/^[a-z0-9_]+$/.test(namespace)) {
    throw new Error("BENCH_NAMESPACE must be set (lower-case letters, digits, _)");
  }
  const running = await start(piece, process.env, namespace);
  const allocations = await sampleAllocations(piece, process.env.BENCH_ALLOC_PROFILE_DIR);
  let stopping = false;
  const shutdown = async () => {
    if (stopping) return;
    stopping = true;
    try {
      await allocations?.write();
      await running.stop();
    } finally {
      process.exit(0);
    }
  };
  process.once("SIGTERM", shutdown);
  process.once("SIGINT", shutdown);
  // The benchmark went away (crashed or was killed): nothing else would stop this process.
  process.once("disconnect", shutdown);
  process.send?.({ type: "ready" });
}

main().catch((error: unknown) => {
  process.stderr.write(
    error instanceof ConfigError
      ? `${error.message}\n`
      : `${process.argv[2]} failed to start: ${(error as Error).stack ?? error}\n`,
  );
  process.exit(1);
});
