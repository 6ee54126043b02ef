import { type MetricsServer, startMetricsServer, startTracing } from "@rowbase/kit";
import { startTestCollector } from "@rowbase/kit/testing";
import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { client } from "./support/http.js";
import { q } from "./support/organizations.js";
import { createTable, createTenant, v1 } from "./support/records.js";

interface LogLine {
  service: string;
  msg: string;
  trace_id?: string;
  request_id?: string;
  procedure?: string;
  route?: string;
  status?: string | number;
}

const lines: LogLine[] = [];
let sys: TestSystem;
let api: ReturnType<typeof client>;

beforeAll(async () => {
  sys = await startTestSystem(
    {},
    { logs: { write: (line: string) => void lines.push(JSON.parse(line) as LogLine) } },
  );
  api = client(sys.baseUrl);
});

afterAll(async () => {
  await sys?.stop();
});

const LOGIN = "rowbase.identity.v1.IdentityService/Login";
const login = (headers: Record<string, string> = {}) =>
  api("POST", "/auth/login", {
    body: { email: `nobody.${Date.now()}@example.test`, password: "correct horse battery" },
    headers,
  });

describe("a request's trace id", () => {
  it("reaches the identity service's log lines from the client's traceparent", async () => {
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const response = await login({ traceparent: `00-${traceId}-00f067aa0ba902b7-01` });
    expect(response.status).toBe(401);
    expect(response.body).toMatchObject({ message: "invalid_credentials" });

    const requestId = response.headers.get("x-request-id");
    const identity = lines.filter((l) => l.service === "identity" && l.procedure === LOGIN);
    expect(identity.find((l) => l.request_id === requestId)).toMatchObject({
      msg: "rpc",
      trace_id: traceId,
    });
    // The gateway's own line of the request carries it too.
    expect(
      lines.find((l) => l.service === "gateway" && l.msg === "request" && l.trace_id === traceId),
    ).toMatchObject({ route: "/auth/login", status: 401, request_id: requestId });
  });

  it("is made by the gateway when the client sends none, and is the same in both processes", async () => {
    const response = await login();
    const requestId = response.headers.get("x-request-id");
    const gateway = lines.find(
      (l) => l.service === "gateway" && l.msg === "request" && l.request_id === requestId,
    );
    const identity = lines.find(
      (l) => l.service === "identity" && l.procedure === LOGIN && l.request_id === requestId,
    );
    expect(gateway?.trace_id).toMatch(/^[0-9a-f]{32}$/);
    expect(identity?.trace_id).toBe(gateway?.trace_id);
    // The next request gets a trace of its own.
    const next = (await login()).headers.get("x-request-id");
    const nextTrace = lines.find(
      (l) => l.service === "gateway" && l.msg === "request" && l.request_id === next,
    )?.trace_id;
    expect(nextTrace).toMatch(/^[0-9a-f]{32}$/);
    expect(nextTrace).not.toBe(gateway?.trace_id);
  });
});

describe("the one registry of the one-process system", () => {
  let metrics: MetricsServer;

  beforeAll(async () => {
    metrics = await startMetricsServer({ port: 0, host: "127.0.0.1" });
  });

  afterAll(async () => {
    await metrics?.close();
  });

  it("counts the gateway's request and the service's call on one /metrics", async () => {
    const scrape = async () => (await fetch(`http://127.0.0.1:${metrics.port}/metrics`)).text();
    const sample = (text: string, series: string) =>
      Number(
        text
          .split("\n")
          .find((l) => l.startsWith(`${series} `))
          ?.split(" ")[1] ?? 0,
      );
    const http = 'rowbase_http_requests_total{method="POST",route="/auth/login",status="401"}';
    const rpc = `rowbase_rpc_server_handled_total{procedure="${LOGIN}",code="Unauthenticated"}`;
    const before = await scrape();
    await login();
    const after = await scrape();
    expect(sample(after, http)).toBe(sample(before, http) + 1);
    expect(sample(after, rpc)).toBe(sample(before, rpc) + 1);
    expect(after).toContain("nodejs_eventloop_lag_seconds");
  });
});

describe("a request's events", () => {
  it("are handled by their consumers within the request's trace", async () => {
    // Spans exported, as with OTEL_EXPORTER_OTLP_ENDPOINT set, from here on.
    const collector = await startTestCollector();
    const tracing = await startTracing({ serviceName: "rowbase", otlpEndpoint: collector.url });
    const tenant = await createTenant(sys, api);
    const table = await createTable(api, tenant, [{ name: "Name", type: "text" }]);
    const audited = async (action: string) => {
      const response = await api("GET", "/audit/list", {
        token: tenant.owner.token,
        query: q({ table_id: table.tableId, action }),
      });
      return response.body.data?.total as number | undefined;
    };
    // Once the setup's last audit event (its field's) is stored, the record's comes to the audit
    // store alone (a batch of events of several traces would start its own trace, linking them).
    await expect.poll(() => audited("field.created"), { timeout: 10_000 }).toBe(1);

    const traceId = "5cf92f3577b34da6a3ce929d0e0e4736";
    const created = await api("POST", v1(table.databaseId, table.tableId).records, {
      token: tenant.owner.token,
      body: { data: { Name: "traced" } },
      headers: { traceparent: `00-${traceId}-00f067aa0ba902b7-01` },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    await expect.poll(() => audited("record.created"), { timeout: 10_000 }).toBe(1);
    await tracing.shutdown(); // flushes the spans to the collector
    await collector.close();

    const stored = collector.exported.find((s) => s.name === "audit.record.created process");
    expect(stored).toMatchObject({ traceId, kind: 5 });
    // It continues the records service's handling of the request, which wrote the event.
    expect(collector.exported.find((s) => s.spanId === stored!.parentSpanId)).toMatchObject({
      traceId,
      name: "rowbase.records.v1.RecordsService/CreateRecord",
    });
  });
});
