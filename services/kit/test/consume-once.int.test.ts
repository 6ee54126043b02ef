import { randomUUID } from "node:crypto";
import { Migration } from "@mikro-orm/migrations";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  applyOnce,
  type BusMessage,
  consumeOnce,
  createLogger,
  createOrm,
  DEAD_LETTER_HEADERS,
  type EventBus,
  migrate,
  NatsBus,
  type Orm,
  PROCESSED_EVENT_TABLE_SQL,
  pruneProcessedEvents,
  STREAMS,
} from "../src/index.js";
import { createTestDatabase, testInfra, uniqueName } from "../src/testing.js";

class CreateTables extends Migration {
  override up() {
    this.addSql(PROCESSED_EVENT_TABLE_SQL);
    // What the handlers apply: one row per application, so a double application shows.
    this.addSql("create table applied (event_id text not null, payload text not null)");
  }
}

const logger = createLogger("kit-test", "silent");
const encode = (text: string) => new TextEncoder().encode(text);
const decode = (data: Uint8Array) => new TextDecoder().decode(data);

let orm: Orm;
let bus: NatsBus;
let natsUrl: string;
let drop: () => Promise<void>;
const namespace = uniqueName("once");
// A duplicate window of one second, so that a republish after it is stored again (as an
// outbox row republished minutes later would be).
const STREAM = {
  name: "ONCE",
  subjects: ["once.>"],
  maxAgeSeconds: 600,
  duplicateWindowSeconds: 1,
};

beforeAll(async () => {
  const infra = await testInfra();
  natsUrl = infra.natsUrl;
  const db = await createTestDatabase(infra.databaseUrl);
  drop = db.drop;
  orm = await createOrm({
    url: db.url,
    schema: "once_test",
    entities: [],
    migrations: [CreateTables],
  });
  await migrate(orm, "once_test");
  bus = await NatsBus.connect(infra.natsUrl, logger, namespace);
  await bus.ensureStreams([STREAM, ...STREAMS.filter((s) => s.name === "DEAD")]);
});

afterAll(async () => {
  await bus?.deleteStreams(["ONCE", "DEAD"]);
  await bus?.close();
  await orm?.close();
  await drop?.();
});

async function applied(): Promise<{ event_id: string; payload: string }[]> {
  return orm.em.fork().execute("select event_id, payload from applied order by payload");
}

async function clear() {
  await orm.em.fork().execute("truncate applied, processed_event");
}

/** The handler under test: records what it applied, in the consumer's transaction. */
const record = async (em: Parameters<Parameters<typeof consumeOnce>[3]>[0], m: BusMessage) => {
  await em.execute("insert into applied (event_id, payload) values (?, ?)", [m.id, decode(m.data)]);
};

/** A bus whose consumers fail after the handler returned, once per message id. */
function crashingAfterCommit(inner: EventBus, crashed: Set<string>): EventBus {
  return {
    kind: inner.kind,
    ensureStreams: (streams) => inner.ensureStreams(streams),
    publish: (subject, data, id) => inner.publish(subject, data, id),
    deadLetter: (letter) => inner.deadLetter(letter),
    close: () => inner.close(),
    consume: (spec, handler) =>
      inner.consume(spec, async (message) => {
        await handler(message);
        if (!crashed.has(message.id)) {
          crashed.add(message.id);
          throw new Error("crashed after the commit, before the ack");
        }
      }),
    consumeBatches: () => {
      throw new Error("consumeOnce consumes one message at a time");
    },
  };
}

describe("applyOnce", () => {
  it("applies an id once per consumer, and again for another consumer", async () => {
    await clear();
    const message: BusMessage = {
      subject: "once.x",
      data: encode("a"),
      id: randomUUID(),
      deliveryCount: 1,
    };
    expect(await applyOnce(orm, "c1", message, record)).toBe(true);
    expect(await applyOnce(orm, "c1", { ...message, deliveryCount: 2 }, record)).toBe(false);
    expect(await applyOnce(orm, "c2", message, record)).toBe(true);
    expect(await applied()).toHaveLength(2);
  });

  it("rolls back the id with the handler's writes when the handler throws", async () => {
    await clear();
    const message: BusMessage = {
      subject: "once.x",
      data: encode("b"),
      id: randomUUID(),
      deliveryCount: 1,
    };
    await expect(
      applyOnce(orm, "c1", message, async (em, m) => {
        await record(em, m);
        throw new Error("handler failed half-way");
      }),
    ).rejects.toThrow("half-way");
    expect(await applied()).toEqual([]);
    expect(await applyOnce(orm, "c1", message, record)).toBe(true);
    expect(await applied()).toEqual([{ event_id: message.id, payload: "b" }]);
  });

  it("lets a concurrent second delivery wait for the first and then skip", async () => {
    await clear();
    const message: BusMessage = {
      subject: "once.x",
      data: encode("c"),
      id: randomUUID(),
      deliveryCount: 1,
    };
    const slow = async (em: Parameters<typeof record>[0], m: BusMessage) => {
      await new Promise((r) => setTimeout(r, 200));
      await record(em, m);
    };
    const results = await Promise.all([
      applyOnce(orm, "c1", message, slow),
      applyOnce(orm, "c1", message, slow),
    ]);
    expect(results.sort()).toEqual([false, true]);
    expect(await applied()).toHaveLength(1);
  });

  it("prunes remembered ids older than the retention only", async () => {
    await clear();
    const old = { subject: "once.x", data: encode("old"), id: randomUUID(), deliveryCount: 1 };
    const fresh = { subject: "once.x", data: encode("new"), id: randomUUID(), deliveryCount: 1 };
    await applyOnce(orm, "c1", old, record);
    await applyOnce(orm, "c1", fresh, record);
    await applyOnce(orm, "c2", old, record);
    await orm.em
      .fork()
      .execute(
        "update processed_event set processed_at = now() - interval '15 days' where event_id = ?",
        [old.id],
      );
    expect(await pruneProcessedEvents(orm, "c1", 14 * 24 * 3600 * 1000)).toBe(1);
    const left = await orm.em
      .fork()
      .execute<{ consumer: string; event_id: string }[]>(
        "select consumer, event_id from processed_event order by consumer, event_id",
      );
    expect(left).toEqual(
      [
        { consumer: "c1", event_id: fresh.id },
        { consumer: "c2", event_id: old.id },
      ].sort((a, b) => a.consumer.localeCompare(b.consumer)),
    );
  });
});

describe("consumeOnce over JetStream", () => {
  it("redelivers after a handler that throws before its commit, and applies once", async () => {
    await clear();
    let failures = 0;
    const consumer = await consumeOnce(
      orm,
      bus,
      { stream: "ONCE", durable: "once_throw", subject: "once.throw" },
      async (em, m) => {
        await record(em, m);
        if (failures++ === 0) throw new Error("crash before the commit");
      },
    );
    const id = randomUUID();
    await bus.publish("once.throw", encode("thrown"), id);
    await expect.poll(applied, { timeout: 10_000 }).toEqual([{ event_id: id, payload: "thrown" }]);
    await new Promise((r) => setTimeout(r, 1500));
    await consumer.stop();
    expect(failures).toBe(2);
    expect(await applied()).toEqual([{ event_id: id, payload: "thrown" }]);
  });

  it("skips the redelivery after a crash between its commit and its ack", async () => {
    await clear();
    const crashed = new Set<string>();
    const deliveries: number[] = [];
    const consumer = await consumeOnce(
      orm,
      crashingAfterCommit(bus, crashed),
      { stream: "ONCE", durable: "once_crash", subject: "once.crash" },
      async (em, m) => {
        deliveries.push(m.deliveryCount);
        await record(em, m);
      },
    );
    const ids = [randomUUID(), randomUUID()];
    for (const [i, id] of ids.entries()) await bus.publish("once.crash", encode(`crash ${i}`), id);
    // Each id crashed once after its commit; the second delivery found it applied and acked.
    await expect.poll(() => crashed.size, { timeout: 10_000 }).toBe(2);
    const seen = async () =>
      (
        await orm.em
          .fork()
          .execute<{ n: number }[]>(
            "select count(*)::int as n from processed_event where consumer = 'once_crash'",
          )
      )[0]?.n;
    await expect.poll(seen, { timeout: 10_000 }).toBe(2);
    await new Promise((r) => setTimeout(r, 2500));
    await consumer.stop();
    expect(deliveries).toEqual([1, 1]);
    expect(await applied()).toEqual([
      { event_id: ids[0], payload: "crash 0" },
      { event_id: ids[1], payload: "crash 1" },
    ]);
  });

  it("applies an event republished after the duplicate window once", async () => {
    await clear();
    const consumer = await consumeOnce(
      orm,
      bus,
      { stream: "ONCE", durable: "once_republish", subject: "once.republished" },
      record,
    );
    const id = randomUUID();
    await bus.publish("once.republished", encode("first"), id);
    await expect.poll(applied, { timeout: 10_000 }).toHaveLength(1);
    await new Promise((r) => setTimeout(r, 1500));
    // Past JetStream's window: the stream stores it again and the consumer gets it again.
    await bus.publish("once.republished", encode("again"), id);
    await bus.publish("once.republished", encode("other"), randomUUID());
    await expect.poll(async () => (await applied()).length, { timeout: 10_000 }).toBe(2);
    await new Promise((r) => setTimeout(r, 500));
    await consumer.stop();
    expect((await applied()).map((r) => r.payload)).toEqual(["first", "other"]);
  });

  it("dead-letters a message that fails every delivery, with where it came from", async () => {
    await clear();
    const consumer = await consumeOnce(
      orm,
      bus,
      { stream: "ONCE", durable: "once_dead", subject: "once.poison", maxDeliver: 2 },
      async () => {
        throw new Error("cannot apply this");
      },
    );
    const id = randomUUID();
    await bus.publish("once.poison", encode("poison"), id);

    const nc = await connect({ servers: natsUrl });
    try {
      const jsm = await jetstreamManager(nc);
      const stream = `${namespace}_DEAD`;
      await expect
        .poll(async () => (await jsm.streams.info(stream)).state.messages, { timeout: 15_000 })
        .toBe(1);
      const dead = await jsm.streams.getMessage(stream, {
        last_by_subj: `${namespace}.dead.once_dead`,
      });
      expect(decode(dead!.data)).toBe("poison");
      expect(dead!.header.get(DEAD_LETTER_HEADERS.subject)).toBe("once.poison");
      expect(dead!.header.get(DEAD_LETTER_HEADERS.stream)).toBe("ONCE");
      expect(dead!.header.get(DEAD_LETTER_HEADERS.id)).toBe(id);
      expect(dead!.header.get(DEAD_LETTER_HEADERS.deliveries)).toBe("2");
      expect(dead!.header.get(DEAD_LETTER_HEADERS.error)).toBe("cannot apply this");
      // Given up: the consumer has nothing pending any more (its end of the message follows the
      // dead letter's publication by a moment), and nothing was applied.
      await expect
        .poll(
          async () => {
            const info = await jsm.consumers.info(`${namespace}_ONCE`, "once_dead");
            return info.num_ack_pending + info.num_pending;
          },
          { timeout: 10_000 },
        )
        .toBe(0);
    } finally {
      await nc.close();
    }
    await consumer.stop();
    expect(await applied()).toEqual([]);
  });
});

describe("stream topology", () => {
  it("creates the streams with their limits and brings existing ones to a changed spec", async () => {
    const ns = uniqueName("topo");
    // Reserving the byte limits, as a deployment's un-namespaced streams do.
    const topoBus = await NatsBus.connect(natsUrl, logger, ns, { reserveBytes: true });
    const nc = await connect({ servers: natsUrl });
    try {
      await topoBus.ensureStreams(STREAMS);
      await topoBus.ensureStreams(STREAMS);
      const jsm = await jetstreamManager(nc);
      const audit = await jsm.streams.info(`${ns}_AUDIT`);
      expect(audit.config).toMatchObject({
        subjects: [`${ns}.audit.>`],
        retention: "limits",
        discard: "new",
        max_bytes: 1024 ** 3,
        max_age: 7 * 24 * 3600 * 1e9,
        duplicate_window: 120 * 1e9,
      });
      const dead = await jsm.streams.info(`${ns}_DEAD`);
      expect(dead.config).toMatchObject({ subjects: [`${ns}.dead.>`], discard: "old" });
      expect(dead.config.max_age).toBe(30 * 24 * 3600 * 1e9);
      expect((await jsm.streams.info(`${ns}_USAGE`)).config.discard).toBe("old");

      await topoBus.ensureStreams([
        { ...STREAMS.find((s) => s.name === "AUDIT")!, maxBytes: 512 * 1024 ** 2 },
      ]);
      expect((await jsm.streams.info(`${ns}_AUDIT`)).config.max_bytes).toBe(512 * 1024 ** 2);
      // A namespaced bus (the other tests') keeps the age limits but reserves no bytes.
      expect((await jsm.streams.info(`${namespace}_DEAD`)).config).toMatchObject({
        max_bytes: -1,
        max_age: 30 * 24 * 3600 * 1e9,
      });

      // A durable consumer is created once and brought to a new max_deliver on a later start.
      const first = await topoBus.consume(
        { stream: "AUDIT", durable: "topo", subject: "audit.>", maxDeliver: 5 },
        async () => {},
      );
      await first.stop();
      const second = await topoBus.consume(
        { stream: "AUDIT", durable: "topo", subject: "audit.>" },
        async () => {},
      );
      await second.stop();
      const consumer = await jsm.consumers.info(`${ns}_AUDIT`, "topo");
      expect(consumer.config).toMatchObject({ ack_policy: "explicit", max_deliver: 20 });
    } finally {
      await nc.close();
      await topoBus.deleteStreams(STREAMS.map((s) => s.name));
      await topoBus.close();
    }
  });
});
