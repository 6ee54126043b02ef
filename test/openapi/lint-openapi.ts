import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, join, resolve } from "node:path";
import { createGateway, loadGatewayConfig } from "@rowbase/gateway";
import { createLogger, createServiceClient, MemoryBus, MemoryCache } from "@rowbase/kit";
import { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import { FilesService } from "@rowbase/proto/rowbase/files/v1/files_service_pb";
import { IdentityService } from "@rowbase/proto/rowbase/identity/v1/identity_service_pb";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { RecordsService } from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import { WebhooksService } from "@rowbase/proto/rowbase/webhooks/v1/webhooks_service_pb";

/**
 * `npm run lint:openapi`: the gateway's /openapi.json, as `npm start` serves it, linted by
 * Redocly's recommended rules with the project's redocly.yaml (each rule it turns off says
 * why). The gateway is built in this process with every service behind an address nobody
 * listens on (the document needs none of them) and asked over loopback; Redocly runs with its
 * telemetry and update check off, so the lint needs no network.
 */

const ROOT = resolve(import.meta.dirname, "../..");
const NOWHERE = "http://127.0.0.1:9";

async function openApiDocument(): Promise<string> {
  const logger = createLogger("gateway", "silent");
  const gateway = createGateway(
    {
      config: loadGatewayConfig({
        IDENTITY_GRPC_URL: NOWHERE,
        ORGANIZATION_GRPC_URL: NOWHERE,
        CATALOG_GRPC_URL: NOWHERE,
        RECORDS_GRPC_URL: NOWHERE,
        FILES_GRPC_URL: NOWHERE,
        WEBHOOKS_GRPC_URL: NOWHERE,
        INTERNAL_JWT_SECRET: "lint-openapi-lint-openapi-lint-openapi",
        LOG_LEVEL: "silent",
      }),
      logger,
      cache: new MemoryCache(),
      bus: new MemoryBus(logger),
      identity: createServiceClient(IdentityService, NOWHERE),
      organization: createServiceClient(OrganizationService, NOWHERE),
      catalog: createServiceClient(CatalogService, NOWHERE),
      records: createServiceClient(RecordsService, NOWHERE),
      files: createServiceClient(FilesService, NOWHERE),
      webhooks: createServiceClient(WebhooksService, NOWHERE),
      healthTargets: [],
    },
    "http://localhost:8080",
  );
  const server = createServer(gateway.app.callback());
  try {
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
    const { port } = server.address() as AddressInfo;
    const response = await fetch(`http://127.0.0.1:${port}/openapi.json`);
    if (response.status !== 200) throw new Error(`/openapi.json answered ${response.status}`);
    return await response.text();
  } finally {
    server.closeAllConnections();
    server.close();
    await gateway.close();
  }
}

// Written where .redocly.lint-ignore.yaml names it (.tools/ is not committed), pretty-printed
// so that Redocly's positions point at a line.
const file = join(ROOT, ".tools/openapi/openapi.json");
mkdirSync(dirname(file), { recursive: true });
writeFileSync(file, `${JSON.stringify(JSON.parse(await openApiDocument()), null, 2)}\n`);
const lint = spawnSync(
  join(ROOT, "node_modules/.bin/redocly"),
  ["lint", file, "--config", join(ROOT, "redocly.yaml"), "--format", "stylish"],
  {
    cwd: ROOT,
    stdio: "inherit",
    env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true" },
  },
);
process.exitCode = lint.status ?? 1;
