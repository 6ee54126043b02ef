import net from "node:net";
import {
  Code,
  createLogger,
  createMetricsRegistry,
  createServiceClient,
  domainError,
  type GrpcServer,
  MemoryBus,
  MemoryCache,
  type MetricsRegistry,
  type MetricsServer,
  startGrpcServer,
  startMetricsServer,
} from "@rowbase/kit";
import { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import { FilesService } from "@rowbase/proto/rowbase/files/v1/files_service_pb";
import { IdentityService } from "@rowbase/proto/rowbase/identity/v1/identity_service_pb";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { RecordsService } from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadGatewayConfig } from "./config.js";
import { type RunningGateway, startGateway } from "./start-gateway.js";

/**
 * The gateway over HTTP with its own metrics registry served on a metrics port, and an identity
 * service (kit's gRPC server, a Login that always refuses) behind it, so that the trace context
 * of a request can be followed into the service's logs.
 */

const SECRET = "test-secret-test-secret-test-secret";

interface LogLine {
  service: string;
  msg: string;
  trace_id?: string;
  request_id?: string;
  procedure?: string;
  route?: string;
}

const lines: LogLine[] = [];
const capture = { write: (line: string) => void lines.push(JSON.parse(line) as LogLine) };

let identity: GrpcServer;
let registry: MetricsRegistry;
let metrics: MetricsServer;
let gateway: RunningGateway;

async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

beforeAll(async () => {
  identity = await startGrpcServer({
    routes: (router) =>
      router.service(IdentityService, {
        login() {
          throw domainError(Code.Unauthenticated, "invalid_credentials");
        },
      }),
    services: [IdentityService],
    host: "127.0.0.1",
    port: 0,
    logger: createLogger("identity", "info", capture),
    internalSecret: SECRET,
    metrics: createMetricsRegistry(),
  });
  const identityUrl = `http://127.0.0.1:${identity.port}`;
  const closedUrl = `http://127.0.0.1:${await closedPort()}`;
  registry = createMetricsRegistry();
  gateway = await startGateway(
    {
      config: loadGatewayConfig({
        IDENTITY_GRPC_URL: identityUrl,
        ORGANIZATION_GRPC_URL: closedUrl,
        CATALOG_GRPC_URL: closedUrl,
        RECORDS_GRPC_URL: closedUrl,
        FILES_GRPC_URL: closedUrl,
        INTERNAL_JWT_SECRET: SECRET,
        RATE_LIMITS: "auth_login_ip=3/60,auth_login_email=off",
        TRUSTED_PROXIES: "127.0.0.1",
      }),
      logger: createLogger("gateway", "info", capture),
      cache: new MemoryCache(),
      bus: new MemoryBus(createLogger("bus", "silent")),
      identity: createServiceClient(IdentityService, identityUrl),
      organization: createServiceClient(OrganizationService, closedUrl),
      catalog: createServiceClient(CatalogService, closedUrl),
      records: createServiceClient(RecordsService, closedUrl),
      files: createServiceClient(FilesService, closedUrl),
      healthTargets: [{ name: "identity", url: identityUrl }],
      metrics: registry,
    },
    { port: 0, host: "127.0.0.1" },
  );
  metrics = await startMetricsServer({ registry, port: 0, host: "127.0.0.1" });
});

afterAll(async () => {
  await metrics?.close();
  await gateway?.close();
  await identity?.close();
});

/** A login from `clientIp` (the gateway trusts the loopback proxy's X-Forwarded-For). */
const login = (clientIp: string, headers: Record<string, string> = {}) =>
  fetch(`http://127.0.0.1:${gateway.port}/auth/login`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-forwarded-for": clientIp, ...headers },
    body: JSON.stringify({ email: "ann@example.com", password: "correct horse battery" }),
  });

async function sample(series: string): Promise<number | undefined> {
  const text = await (await fetch(`http://127.0.0.1:${metrics.port}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

const LOGIN = (status: number) =>
  `rowbase_http_requests_total{method="POST",route="/auth/login",status="${status}"}`;
const UNMATCHED = 'rowbase_http_requests_total{method="GET",route="unmatched",status="404"}';
const REFUSED = 'rowbase_rate_limit_refusals_total{limit="auth_login_ip"}';

describe("gateway metrics on /metrics", () => {
  it("count a request under its route template and status, and time it", async () => {
    const before = (await sample(LOGIN(401))) ?? 0;
    expect((await login("198.51.100.1")).status).toBe(401);
    expect(await sample(LOGIN(401))).toBe(before + 1);
    expect(
      await sample(
        'rowbase_http_request_duration_seconds_count{method="POST",route="/auth/login",status="401"}',
      ),
    ).toBe(before + 1);

    expect(await sample(UNMATCHED)).toBeUndefined();
    await fetch(`http://127.0.0.1:${gateway.port}/no/such/path/42`);
    expect(await sample(UNMATCHED)).toBe(1);
  });

  it("count a 429 under the name of the limit that refused it", async () => {
    expect(await sample(REFUSED)).toBeUndefined();
    const before = (await sample(LOGIN(429))) ?? 0;
    const statuses = [];
    for (let i = 0; i < 5; i++) statuses.push((await login("198.51.100.2")).status);
    expect(statuses).toEqual([401, 401, 401, 429, 429]);
    expect(await sample(REFUSED)).toBe(2);
    expect(await sample(LOGIN(429))).toBe(before + 2);
  });
});

describe("a request's trace", () => {
  const identityLine = (requestId: string) =>
    lines.find((l) => l.service === "identity" && l.request_id === requestId);
  const gatewayLine = (requestId: string) =>
    lines.find((l) => l.service === "gateway" && l.msg === "request" && l.request_id === requestId);

  it("continues the client's traceparent into the service's log lines", async () => {
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const response = await login("198.51.100.3", {
      traceparent: `00-${traceId}-00f067aa0ba902b7-01`,
      "x-request-id": "traced-1",
    });
    expect(response.status).toBe(401);
    expect(gatewayLine("traced-1")).toMatchObject({ route: "/auth/login", trace_id: traceId });
    expect(identityLine("traced-1")).toMatchObject({
      msg: "rpc",
      procedure: "rowbase.identity.v1.IdentityService/Login",
      trace_id: traceId,
    });
  });

  it("is made by the gateway when the client sends none, the same in the service", async () => {
    await login("198.51.100.4", { "x-request-id": "untraced-1" });
    await login("198.51.100.4", { "x-request-id": "untraced-2" });
    const first = gatewayLine("untraced-1")?.trace_id;
    expect(first).toMatch(/^[0-9a-f]{32}$/);
    expect(identityLine("untraced-1")?.trace_id).toBe(first);
    expect(gatewayLine("untraced-2")?.trace_id).not.toBe(first);
  });
});
