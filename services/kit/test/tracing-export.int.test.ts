import { Code, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { Migration } from "@mikro-orm/migrations";
import { Health } from "@rowbase/proto/grpc/health/v1/health_pb";
import { IdentityService } from "@rowbase/proto/rowbase/identity/v1/identity_service_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createLogger,
  createOrm,
  type GrpcServer,
  MemoryBus,
  migrate,
  type Orm,
  OUTBOX_TABLE_SQL,
  OutboxRelay,
  startTracing,
  type Tracing,
} from "../src/index.js";
import {
  attribute,
  createTestDatabase,
  startTestCollector,
  type TestCollector,
  testInfra,
} from "../src/testing.js";
import { startTestGrpcServer } from "./test-grpc-server.js";

// Tracing on, as with OTEL_EXPORTER_OTLP_ENDPOINT set: spans go over OTLP/HTTP (JSON) to a
// collector, here a plain HTTP server that keeps what it is sent.

class CreateOutbox extends Migration {
  override up() {
    this.addSql(OUTBOX_TABLE_SQL);
  }
}

const TRACE_ID = "5bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN_ID = "00f067aa0ba902b7";
const SERVER_KIND = 2;

const logger = createLogger("kit-test", "silent");
let collector: TestCollector;
let tracing: Tracing;
let orm: Orm;
let relay: OutboxRelay;
let server: GrpcServer;
let drop: () => Promise<void>;

beforeAll(async () => {
  collector = await startTestCollector();
  tracing = await startTracing({
    serviceName: "kit-trace-test",
    otlpEndpoint: collector.url,
  });

  const infra = await testInfra();
  const db = await createTestDatabase(infra.databaseUrl);
  drop = db.drop;
  orm = await createOrm({
    url: db.url,
    schema: "kit_trace",
    entities: [],
    migrations: [CreateOutbox],
  });
  await migrate(orm, "kit_trace");
  relay = new OutboxRelay(orm, new MemoryBus(logger), logger);
  server = await startTestGrpcServer({
    routes: (router) =>
      router.service(IdentityService, {
        async getJwks() {
          // Values written into the text, as MikroORM writes its own: none may reach a span.
          await orm.em
            .fork()
            .execute("select 42 as answer, ? as secret, E'it''s' as quoted", ["hunter2-password"]);
          // As a service does after a commit that enqueued events: the relay's round must
          // not become part of this call's trace.
          relay.kick();
          return { keys: [] };
        },
        getUsers() {
          throw new Error("the disk is on fire");
        },
      }),
    services: [IdentityService],
    logger,
  });
});

afterAll(async () => {
  await server?.close();
  await relay?.stop();
  await tracing?.shutdown();
  await orm?.close();
  await drop?.();
  await collector?.close();
});

describe("traces exported over OTLP", () => {
  it("continue the caller's trace through the RPC into its PostgreSQL queries", async () => {
    expect(tracing.recording).toBe(true);
    const transport = createGrpcTransport({ baseUrl: `http://127.0.0.1:${server.port}` });
    const identity = createClient(IdentityService, transport);
    await identity.getJwks({}, { headers: { traceparent: `00-${TRACE_ID}-${CALLER_SPAN_ID}-01` } });
    await expect(identity.getUsers({})).rejects.toMatchObject({ code: Code.Internal });
    // Probes are not traced (they would send a trace every few seconds per pod).
    await createClient(Health, transport).check({});
    await relay.stop();
    await tracing.shutdown(); // flushes the batch to the collector
    const { exported } = collector;

    const rpc = exported.find((s) => s.name === "rowbase.identity.v1.IdentityService/GetJwks");
    expect(rpc).toMatchObject({
      traceId: TRACE_ID,
      parentSpanId: CALLER_SPAN_ID,
      kind: SERVER_KIND,
      serviceName: "kit-trace-test",
    });
    expect(attribute(rpc!, "rpc.system")).toBe("grpc");
    expect(attribute(rpc!, "rpc.grpc.status_code")).toBe(0);

    const queries = exported.filter((s) => s.traceId === TRACE_ID && s !== rpc);
    const select = queries.find((s) =>
      s.attributes.some(
        (a) => a.value.stringValue === "select ? as answer, ? as secret, ? as quoted",
      ),
    );
    expect(select, JSON.stringify(queries, null, 2)).toBeDefined();
    expect(JSON.stringify(exported)).not.toMatch(/hunter2|it''s/);
    expect(select!.parentSpanId).toBe(rpc!.spanId);
    expect(attribute(select!, "db.system.name") ?? attribute(select!, "db.system")).toBe(
      "postgresql",
    );

    // A server fault marks its span failed and keeps the masked cause as the exception.
    const failed = exported.find((s) => s.name === "rowbase.identity.v1.IdentityService/GetUsers");
    expect(failed?.status?.code).toBe(2);
    expect(attribute(failed!, "rpc.grpc.status_code")).toBe(Code.Internal);
    const exception = failed?.events?.find((e) => e.name === "exception");
    expect(exception?.attributes).toContainEqual({
      key: "exception.message",
      value: { stringValue: "the disk is on fire" },
    });

    // Queries no call started (the migrations in beforeAll) make no traces of their own, nor
    // does the health check.
    expect(new Set(exported.map((s) => s.traceId))).toEqual(new Set([TRACE_ID, failed!.traceId]));

    // The relay ran (kicked inside the call) but recorded nothing, in this trace or another.
    const relayQueries = exported.filter((s) =>
      s.attributes.some((a) => a.value.stringValue?.includes("from outbox")),
    );
    expect(relayQueries).toEqual([]);
  });
});
