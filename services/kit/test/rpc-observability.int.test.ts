import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { Health } from "@rowbase/proto/grpc/health/v1/health_pb";
import { IdentityService } from "@rowbase/proto/rowbase/identity/v1/identity_service_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createLogger,
  createMetricsRegistry,
  createServiceClient,
  type GrpcServer,
  type MetricsRegistry,
  type MetricsServer,
  startGrpcServer,
  startMetricsServer,
} from "../src/index.js";

// No tracing is started here, as in a test or an embedding program: kit's id-only mode must
// still carry a caller's trace id into the logs and on to the next service.

const SECRET = "a-shared-internal-secret-of-32-chars!";
const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const TRACEPARENT = `00-${TRACE_ID}-00f067aa0ba902b7-01`;

interface LogLine {
  service: string;
  msg: string;
  procedure?: string;
  status?: string;
  trace_id?: string;
  request_id?: string;
}

const lines: LogLine[] = [];
const capture = { write: (line: string) => void lines.push(JSON.parse(line) as LogLine) };

let registry: MetricsRegistry;
let downstream: GrpcServer;
let upstream: GrpcServer;
let metricsServer: MetricsServer;

beforeAll(async () => {
  registry = createMetricsRegistry();
  downstream = await startGrpcServer({
    routes: () => {},
    services: [],
    host: "127.0.0.1",
    port: 0,
    logger: createLogger("downstream", "info", capture),
    internalSecret: SECRET,
    metrics: registry,
  });
  // A service whose handler calls another one, as catalog calls organization.
  const health = createServiceClient(Health, `http://127.0.0.1:${downstream.port}`);
  upstream = await startGrpcServer({
    routes: (router) =>
      router.service(IdentityService, {
        async getJwks() {
          await health.check({});
          return { keys: [] };
        },
      }),
    services: [IdentityService],
    host: "127.0.0.1",
    port: 0,
    logger: createLogger("upstream", "info", capture),
    internalSecret: SECRET,
    metrics: registry,
  });
  metricsServer = await startMetricsServer({ registry, port: 0, host: "127.0.0.1" });
});

afterAll(async () => {
  await metricsServer?.close();
  await upstream?.close();
  await downstream?.close();
});

function client<S extends typeof Health | typeof IdentityService>(service: S, server: GrpcServer) {
  return createClient(service, createGrpcTransport({ baseUrl: `http://127.0.0.1:${server.port}` }));
}

async function scrape(): Promise<string> {
  const response = await fetch(`http://127.0.0.1:${metricsServer.port}/metrics`);
  expect(response.status).toBe(200);
  expect(response.headers.get("content-type")).toContain("text/plain");
  return response.text();
}

/** The value of one sample in the Prometheus text, or undefined when the series is absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

const CHECK_OK =
  'rowbase_rpc_server_handled_total{procedure="grpc.health.v1.Health/Check",code="OK"}';
const CHECK_NOT_FOUND =
  'rowbase_rpc_server_handled_total{procedure="grpc.health.v1.Health/Check",code="NotFound"}';

describe("RPC metrics", () => {
  it("counts and times each call by procedure and status code, served on /metrics", async () => {
    const before = await scrape();
    const ok = sample(before, CHECK_OK) ?? 0;
    const notFound = sample(before, CHECK_NOT_FOUND) ?? 0;

    const health = client(Health, downstream);
    await health.check({});
    await health.check({});
    await expect(health.check({ service: "rowbase.nope.v1.NopeService" })).rejects.toMatchObject({
      code: Code.NotFound,
    });

    const after = await scrape();
    expect(sample(after, CHECK_OK)).toBe(ok + 2);
    expect(sample(after, CHECK_NOT_FOUND)).toBe(notFound + 1);
    expect(
      sample(
        after,
        'rowbase_rpc_server_handling_seconds_count{procedure="grpc.health.v1.Health/Check",code="OK"}',
      ),
    ).toBe(ok + 2);
    expect(after).toContain("# TYPE rowbase_rpc_server_handling_seconds histogram");
  });

  it("answers only GET /metrics", async () => {
    const base = `http://127.0.0.1:${metricsServer.port}`;
    expect((await fetch(`${base}/other`)).status).toBe(404);
    expect((await fetch(`${base}/metrics`, { method: "POST" })).status).toBe(405);
  });
});

describe("trace ids in the service's logs", () => {
  it("writes the caller's traceparent trace id on the call's log line", async () => {
    await client(Health, downstream).check({}, { headers: { traceparent: TRACEPARENT } });
    const line = lines.findLast((l) => l.service === "downstream" && l.msg === "rpc");
    expect(line).toMatchObject({
      procedure: "grpc.health.v1.Health/Check",
      status: "ok",
      trace_id: TRACE_ID,
    });
  });

  it("gives a call without a traceparent a trace id of its own, different each time", async () => {
    const health = client(Health, downstream);
    await health.check({}, { headers: { "x-request-id": "first-call" } });
    await health.check({}, { headers: { "x-request-id": "second-call" } });
    const first = lines.find((l) => l.request_id === "first-call");
    const second = lines.find((l) => l.request_id === "second-call");
    expect(first?.trace_id).toMatch(/^[0-9a-f]{32}$/);
    expect(second?.trace_id).toMatch(/^[0-9a-f]{32}$/);
    expect(first?.trace_id).not.toBe(second?.trace_id);
  });

  it("carries the trace on to the services a handler calls (createServiceClient)", async () => {
    const traceId = "0af7651916cd43dd8448eb211c80319c";
    await client(IdentityService, upstream).getJwks(
      {},
      { headers: { traceparent: `00-${traceId}-b7ad6b7169203331-01` } },
    );
    expect(
      lines.filter((l) => l.trace_id === traceId).map((l) => [l.service, l.procedure]),
    ).toEqual([
      ["downstream", "grpc.health.v1.Health/Check"],
      ["upstream", "rowbase.identity.v1.IdentityService/GetJwks"],
    ]);
  });

  it("ignores a malformed traceparent and starts a new trace", async () => {
    await client(Health, downstream).check(
      {},
      { headers: { traceparent: "00-not-a-trace-01", "x-request-id": "malformed" } },
    );
    const line = lines.find((l) => l.request_id === "malformed");
    expect(line?.trace_id).toMatch(/^[0-9a-f]{32}$/);
  });

  it("leaves lines written outside a call without a trace id", () => {
    const logger = createLogger("outside", "info", capture);
    logger.info("idle");
    expect(lines.at(-1)).toMatchObject({ service: "outside", msg: "idle" });
    expect(lines.at(-1)).not.toHaveProperty("trace_id");
  });
});

describe("a failing call", () => {
  it("is counted under its status code", async () => {
    const upstreamClient = client(IdentityService, upstream);
    const error = await upstreamClient.getCurrentUser({}).catch((e: unknown) => e);
    expect(ConnectError.from(error).code).toBe(Code.Unimplemented);
    expect(
      sample(
        await scrape(),
        'rowbase_rpc_server_handled_total{procedure="rowbase.identity.v1.IdentityService/GetCurrentUser",code="Unimplemented"}',
      ),
    ).toBe(1);
  });
});
