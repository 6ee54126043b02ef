import { Migration } from "@mikro-orm/migrations";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { RecordsDeletedSchema } from "@rowbase/proto/rowbase/events/v1/records_events_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type BusMessage,
  createLogger,
  createOrm,
  inConsumerSpan,
  inServerSpan,
  migrate,
  NatsBus,
  type Orm,
  OUTBOX_TABLE_SQL,
  OutboxRelay,
  publishEvent,
  startTracing,
  type Tracing,
} from "../src/index.js";
import {
  attribute,
  createTestDatabase,
  type ExportedSpan,
  startTestCollector,
  type TestCollector,
  testInfra,
  uniqueName,
} from "../src/testing.js";

// A request's events carry its trace context through the outbox and JetStream: the consumer's
// handling continues the trace (one event) or links the traces (a batch of several), with
// spans exported to a collector as with OTEL_EXPORTER_OTLP_ENDPOINT set.

class CreateOutbox extends Migration {
  override up() {
    this.addSql(OUTBOX_TABLE_SQL);
  }
}

interface LogLine {
  msg: string;
  trace_id?: string;
}

const CALLER_SPAN_ID = "00f067aa0ba902b7";
const CONSUMER_KIND = 5;
const traceIds = {
  single: "6bf92f3577b34da6a3ce929d0e0e4736",
  first: "7bf92f3577b34da6a3ce929d0e0e4736",
  b1: "8bf92f3577b34da6a3ce929d0e0e4736",
  b2: "9bf92f3577b34da6a3ce929d0e0e4736",
  b3: "abf92f3577b34da6a3ce929d0e0e4736",
};

const lines: LogLine[] = [];
const logger = createLogger("kit-test", "info", {
  write: (line: string) => void lines.push(JSON.parse(line) as LogLine),
});
const namespace = uniqueName("kit");
let collector: TestCollector;
let tracing: Tracing;
let orm: Orm;
let bus: NatsBus;
let relay: OutboxRelay;
let nc: NatsConnection;
let drop: () => Promise<void>;

beforeAll(async () => {
  collector = await startTestCollector();
  tracing = await startTracing({ serviceName: "kit-event-test", otlpEndpoint: collector.url });
  const infra = await testInfra();
  const db = await createTestDatabase(infra.databaseUrl);
  drop = db.drop;
  orm = await createOrm({
    url: db.url,
    schema: "kit_events",
    entities: [],
    migrations: [CreateOutbox],
  });
  await migrate(orm, "kit_events");
  bus = await NatsBus.connect(infra.natsUrl, logger, namespace);
  await bus.ensureStreams([{ name: "EV", subjects: ["ev.>"], maxAgeSeconds: 600 }]);
  relay = new OutboxRelay(orm, bus, logger);
  nc = await connect({ servers: infra.natsUrl });
});

afterAll(async () => {
  await tracing?.shutdown();
  await bus?.deleteStreams(["EV"]);
  await bus?.close();
  await nc?.close();
  await orm?.close();
  await drop?.();
  await collector?.close();
});

/**
 * A request of trace `traceId` (as the gateway's `traceparent` starts it) whose transaction
 * writes an event on `subject`, relayed to JetStream; returns the request span's id.
 */
async function request(traceId: string, subject: string, sampled = true): Promise<string> {
  const traceparent = `00-${traceId}-${CALLER_SPAN_ID}-${sampled ? "01" : "00"}`;
  const spanId = await inServerSpan(
    { name: "request", header: (name) => (name === "traceparent" ? traceparent : undefined) },
    async (span) => {
      await orm.em
        .fork()
        .transactional((em) =>
          publishEvent(
            em,
            subject,
            RecordsDeletedSchema,
            { organizationId: 1n, tableId: 1n, rowIds: [1n] },
            {},
          ),
        );
      return span.spanContext().spanId;
    },
  );
  await relay.flush();
  return spanId;
}

function consumerSpans(name: string): ExportedSpan[] {
  return collector.exported.filter((s) => s.name === name && s.kind === CONSUMER_KIND);
}

describe("events carry their request's trace to the consumers", () => {
  it("continues the trace of one event and links those of a batch", async () => {
    // One event at a time: its handling continues the request's trace, queries and logs included.
    const single = Promise.withResolvers<BusMessage>();
    const singleConsumer = await bus.consume(
      { stream: "EV", durable: "single", subject: "ev.single" },
      async (message) => {
        await orm.em.fork().execute("select 1 as handled");
        logger.info("single event handled");
        single.resolve(message);
      },
    );
    const singleRequest = await request(traceIds.single, "ev.single");
    const delivered = await single.promise;

    // A batch: the first event keeps the handler busy while three more, of three requests, wait
    // in the client; they are then handed over together.
    const batches: BusMessage[][] = [];
    const busy = Promise.withResolvers<void>();
    const gate = Promise.withResolvers<void>();
    const done = Promise.withResolvers<void>();
    const batchConsumer = await bus.consumeBatches(
      {
        stream: "EV",
        durable: "batched",
        subject: "ev.batch",
        batch: { messages: 10, bytes: 1024 * 1024 },
      },
      async (messages) => {
        batches.push(messages);
        logger.info({ messages: messages.length }, "batch handled");
        if (batches.length === 1) {
          busy.resolve();
          await gate.promise;
        }
        if (batches.flat().length === 4) done.resolve();
      },
    );
    const firstRequest = await request(traceIds.first, "ev.batch");
    await busy.promise;
    const batchRequests = [
      await request(traceIds.b1, "ev.batch"),
      await request(traceIds.b2, "ev.batch", false),
      await request(traceIds.b3, "ev.batch"),
    ];
    // JetStream has delivered them to the bus's connection; a reply on that connection comes
    // after them, and once the microtasks have run they wait in the consumer's queue.
    const jsm = await jetstreamManager(nc);
    await expect
      .poll(async () => (await jsm.consumers.info(`${namespace}_EV`, "batched")).num_ack_pending)
      .toBe(4);
    await bus.publish("ev.other", new Uint8Array(), "other");
    await new Promise((resolve) => setImmediate(resolve));
    gate.resolve();
    await done.promise;
    expect(batches.map((b) => b.length)).toEqual([1, 3]);

    // A batch of traces none of which is recorded, or of events of no trace, is not recorded.
    const unsampled = [traceIds.b2, traceIds.b3].map((id) => `00-${id}-${CALLER_SPAN_ID}-00`);
    await inConsumerSpan({ name: "unsampled process", traceparents: unsampled }, async () => {});
    await inConsumerSpan({ name: "untraced process", traceparents: [] }, async () => {});

    // Stopped, their spans have ended; shut down, tracing has sent them to the collector.
    await singleConsumer.stop();
    await batchConsumer.stop();
    await tracing.shutdown();

    const [singleSpan] = consumerSpans("ev.single process");
    expect(singleSpan).toMatchObject({ traceId: traceIds.single, parentSpanId: singleRequest });
    expect(attribute(singleSpan!, "messaging.system.name")).toBe("nats");
    expect(attribute(singleSpan!, "messaging.operation.type")).toBe("process");
    expect(attribute(singleSpan!, "messaging.destination.name")).toBe("ev.single");
    expect(attribute(singleSpan!, "messaging.consumer.group.name")).toBe("single");
    expect(attribute(singleSpan!, "messaging.message.id")).toBe(delivered.id);
    const query = collector.exported.find((s) =>
      s.attributes.some((a) => a.value.stringValue === "select ? as handled"),
    );
    expect(query).toMatchObject({ traceId: traceIds.single, parentSpanId: singleSpan!.spanId });
    expect(lines.find((l) => l.msg === "single event handled")?.trace_id).toBe(traceIds.single);

    const [alone, batch, ...more] = consumerSpans("ev.batch process");
    expect(more).toEqual([]);
    expect(alone).toMatchObject({ traceId: traceIds.first, parentSpanId: firstRequest });
    // A batch of several traces starts its own, linking each (recorded: some are sampled).
    expect(batch!.parentSpanId ?? "").toBe("");
    expect(Object.values(traceIds)).not.toContain(batch!.traceId);
    expect(batch!.links?.map((l) => [l.traceId, l.spanId])).toEqual([
      [traceIds.b1, batchRequests[0]],
      [traceIds.b2, batchRequests[1]],
      [traceIds.b3, batchRequests[2]],
    ]);
    expect(attribute(batch!, "messaging.batch.message_count")).toBe(3);
    expect(lines.filter((l) => l.msg === "batch handled").map((l) => l.trace_id)).toEqual([
      traceIds.first,
      batch!.traceId,
    ]);

    expect(consumerSpans("unsampled process")).toEqual([]);
    expect(consumerSpans("untraced process")).toEqual([]);

    // The relay's rounds are no part of any trace.
    const relayQueries = collector.exported.filter((s) =>
      s.attributes.some((a) => a.value.stringValue?.includes("from outbox")),
    );
    expect(relayQueries).toEqual([]);
  });
});
