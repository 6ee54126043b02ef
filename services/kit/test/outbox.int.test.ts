import { randomUUID } from "node:crypto";
import { Migration } from "@mikro-orm/migrations";
import { DiscardPolicy, jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type BusMessage,
  createLogger,
  createOrm,
  DEAD_LETTER_HEADERS,
  enqueueEvent,
  enqueueEvents,
  MAX_EVENT_BYTES,
  migrate,
  NatsBus,
  type Orm,
  OUTBOX_TABLE_SQL,
  OutboxRelay,
  queryWithOutbox,
  STREAMS,
} from "../src/index.js";
import { createTestDatabase, testInfra, uniqueName } from "../src/testing.js";

class CreateOutbox extends Migration {
  override up() {
    this.addSql(OUTBOX_TABLE_SQL);
  }
}

const logger = createLogger("kit-test", "silent");

describe("outbox relay against PostgreSQL and NATS JetStream", () => {
  let orm: Orm;
  let bus: NatsBus;
  let drop: () => Promise<void>;
  let natsUrl: string;
  const namespace = uniqueName("kit");

  beforeAll(async () => {
    const infra = await testInfra();
    const db = await createTestDatabase(infra.databaseUrl);
    drop = db.drop;
    orm = await createOrm({
      url: db.url,
      schema: "kit_test",
      entities: [],
      migrations: [CreateOutbox],
    });
    expect(await migrate(orm, "kit_test")).toEqual(["CreateOutbox"]);
    natsUrl = infra.natsUrl;
    bus = await NatsBus.connect(infra.natsUrl, logger, namespace);
    await bus.ensureStreams([{ name: "TEST", subjects: ["test.>"], maxAgeSeconds: 600 }]);
  });

  afterAll(async () => {
    await bus?.deleteStreams(["TEST", "DEAD"]);
    await bus?.close();
    await orm?.close();
    await drop?.();
  });

  it("publishes committed events once, and never rolled-back ones", async () => {
    const received: BusMessage[] = [];
    const consumer = await bus.consume(
      { stream: "TEST", durable: "kit_test", subject: "test.>" },
      async (m) => {
        received.push(m);
      },
    );
    const committed = randomUUID();
    await orm.em.fork().transactional(async (em) => {
      await enqueueEvent(em, "test.committed", new TextEncoder().encode("yes"), committed);
    });
    await expect(
      orm.em.fork().transactional(async (em) => {
        await enqueueEvent(em, "test.rolled_back", new TextEncoder().encode("no"));
        throw new Error("abort");
      }),
    ).rejects.toThrow("abort");

    const relay = new OutboxRelay(orm, bus, logger);
    await relay.flush();
    // A second relay round and a republish of the same id must not deliver it twice.
    await relay.flush();
    await bus.publish("test.committed", new TextEncoder().encode("yes"), committed);
    await expect.poll(() => received.length, { timeout: 5000 }).toBe(1);
    await new Promise((r) => setTimeout(r, 300));
    await consumer.stop();

    expect(received).toHaveLength(1);
    expect(received[0]).toMatchObject({ subject: "test.committed", id: committed });
    expect(new TextDecoder().decode(received[0]!.data)).toBe("yes");
    const pending = await orm.em
      .fork()
      .execute("select count(*)::int as n from outbox where published_at is null");
    expect(pending[0]).toEqual({ n: 1 - 1 });
  });

  it("enqueues many events in one statement, in order, and publishes them in that order", async () => {
    const received: BusMessage[] = [];
    const consumer = await bus.consume(
      { stream: "TEST", durable: "kit_test_many", subject: "test.many.>" },
      async (m) => {
        received.push(m);
      },
    );
    const entries = Array.from({ length: 250 }, (_, i) => ({
      subject: `test.many.${i % 3}`,
      payload: new Uint8Array([i % 256, 0, 255]),
      eventId: randomUUID(),
    }));
    await orm.em.fork().transactional(async (em) => {
      await enqueueEvents(em, entries);
    });
    await expect(
      orm.em.fork().transactional(async (em) => {
        await enqueueEvents(em, [
          { subject: "test.many.x", payload: new Uint8Array(), eventId: randomUUID() },
        ]);
        throw new Error("abort");
      }),
    ).rejects.toThrow("abort");
    const relay = new OutboxRelay(orm, bus, logger);
    await relay.flush();
    await expect.poll(() => received.length, { timeout: 5000 }).toBe(entries.length);
    await consumer.stop();
    expect(received.map((m) => ({ subject: m.subject, id: m.id, data: [...m.data] }))).toEqual(
      entries.map((e) => ({ subject: e.subject, id: e.eventId, data: [...e.payload] })),
    );
  });

  it("stops after the batch in flight and leaves a backlog to the next relay, in order", async () => {
    const entries = Array.from({ length: 40 }, (_, i) => ({
      subject: `test.backlog.${i}`,
      payload: new Uint8Array([i]),
      eventId: randomUUID(),
    }));
    await orm.em.fork().transactional(async (em) => {
      await enqueueEvents(em, entries);
    });
    const pending = async () => {
      const [row] = await orm.em
        .fork()
        .execute<{ n: number }[]>(
          "select count(*)::int as n from outbox where published_at is null and subject like 'test.backlog.%'",
        );
      return row!.n;
    };
    const first = new OutboxRelay(orm, bus, logger, { batchSize: 5, intervalMs: 60_000 });
    first.start();
    await first.stop();
    // start() began one round; stop() let its first batch finish and no other.
    expect(await pending()).toBe(entries.length - 5);

    const received: BusMessage[] = [];
    const consumer = await bus.consume(
      { stream: "TEST", durable: "kit_test_backlog", subject: "test.backlog.>" },
      async (m) => {
        received.push(m);
      },
    );
    await new OutboxRelay(orm, bus, logger, { batchSize: 5 }).flush();
    expect(await pending()).toBe(0);
    await expect.poll(() => received.length, { timeout: 5000 }).toBe(entries.length);
    await consumer.stop();
    expect(received.map((m) => m.id)).toEqual(entries.map((e) => e.eventId));
  });

  it("relays a schema's outbox from one replica at a time", async () => {
    const eventId = randomUUID();
    await orm.em.fork().transactional(async (em) => {
      await enqueueEvents(em, [{ subject: "test.single", payload: new Uint8Array([1]), eventId }]);
    });
    const published = async () =>
      (
        await orm.em
          .fork()
          .execute<{ published: boolean }[]>(
            "select published_at is not null as published from outbox where event_id = ?",
            [eventId],
          )
      )[0]?.published;
    // Another replica's relay, in the middle of its round.
    await orm.em.fork().transactional(async (em) => {
      await em.execute(
        "select pg_advisory_xact_lock(hashtextextended('rowbase.outbox-relay:kit_test', 0))",
      );
      await new OutboxRelay(orm, bus, logger).flush();
      expect(await published()).toBe(false);
    });
    await new OutboxRelay(orm, bus, logger).flush();
    expect(await published()).toBe(true);
  });

  describe("events a commit hands to the relay", () => {
    // Each event is written with the payload "stored" and handed over with "held": what the
    // bus receives shows where the relay took it from.
    const stored = new TextEncoder().encode("stored");
    const held = new TextEncoder().encode("held");
    const receive = async (
      durable: string,
      subject: string,
      count: number,
      work: () => Promise<void>,
    ) => {
      const received: BusMessage[] = [];
      const consumer = await bus.consume({ stream: "TEST", durable, subject }, async (m) => {
        received.push(m);
      });
      await work();
      await expect.poll(() => received.length, { timeout: 5000 }).toBe(count);
      await consumer.stop();
      return new Map(received.map((m) => [m.id, new TextDecoder().decode(m.data)]));
    };
    const write = async (subject: string, count: number) => {
      const entries = Array.from({ length: count }, () => ({
        subject,
        payload: stored,
        eventId: randomUUID(),
      }));
      await orm.em.fork().transactional(async (em) => {
        await enqueueEvents(em, entries);
      });
      return entries;
    };

    it("are published from the payloads it holds, the others as stored, each once", async () => {
      const entries = await write("test.held.a", 3);
      const relay = new OutboxRelay(orm, bus, logger, { intervalMs: 60_000 });
      // Held: the first, and an event that was never written (it must not be published).
      const ghost = { subject: "test.held.a", payload: held, eventId: randomUUID() };
      const data = await receive("kit_test_held", "test.held.a", 3, async () => {
        relay.kick([{ ...entries[0]!, payload: held }, ghost]);
        await relay.stop();
      });
      expect([...data]).toEqual([
        [entries[0]!.eventId, "held"],
        [entries[1]!.eventId, "stored"],
        [entries[2]!.eventId, "stored"],
      ]);
      const [row] = await orm.em
        .fork()
        .execute<{ n: number }[]>(
          "select count(*)::int as n from outbox where subject = 'test.held.a' and published_at is null",
        );
      expect(row!.n).toBe(0);
    });

    it("are held up to the relay's bounds and for its time only", async () => {
      const entries = await write("test.held.b", 5);
      const relay = new OutboxRelay(orm, bus, logger, {
        intervalMs: 60_000,
        hold: { events: 2, bytes: 1024, ms: 60_000 },
      });
      const data = await receive("kit_test_held_bounds", "test.held.b", 5, async () => {
        relay.kick(entries.map((entry) => ({ ...entry, payload: held })));
        await relay.stop();
      });
      expect([...data.values()]).toEqual(["held", "held", "stored", "stored", "stored"]);

      // Handed over before their rows exist (as a replica whose rows another relays): a round
      // finds nothing, and the payloads are let go once their time is up.
      const late = ["test.held.c", "test.held.c"].map((subject) => ({
        subject,
        payload: stored,
        eventId: randomUUID(),
      }));
      const brief = new OutboxRelay(orm, bus, logger, {
        intervalMs: 60_000,
        hold: { events: 10, bytes: 1024, ms: 20 },
      });
      brief.kick(late.map((entry) => ({ ...entry, payload: held })));
      await brief.stop();
      await new Promise((r) => setTimeout(r, 50));
      await orm.em.fork().transactional(async (em) => {
        await enqueueEvents(em, late);
      });
      const lateData = await receive("kit_test_held_time", "test.held.c", 2, () => brief.flush());
      expect([...lateData.values()]).toEqual(["stored", "stored"]);
    });
  });

  it("refuses an event the bus could never take, writing nothing", async () => {
    const eventId = randomUUID();
    await expect(
      orm.em.fork().transactional(async (em) => {
        await enqueueEvents(em, [
          { subject: "test.huge", payload: new Uint8Array(MAX_EVENT_BYTES + 1), eventId },
        ]);
      }),
    ).rejects.toThrow("over the bus's limit");
    const rows = await orm.em.fork().execute("select 1 from outbox where event_id = ?", [eventId]);
    expect(rows).toEqual([]);
  });

  it("leaves a batch pending when a publish fails", async () => {
    // No stream takes this subject: JetStream refuses the publish.
    const eventId = randomUUID();
    await orm.em.fork().transactional(async (em) => {
      await enqueueEvents(em, [
        { subject: "unstreamed.event", payload: new Uint8Array([1]), eventId },
      ]);
    });
    await expect(new OutboxRelay(orm, bus, logger).flush()).rejects.toThrow();
    const published = () =>
      orm.em
        .fork()
        .execute<{ published: boolean }[]>(
          "select published_at is not null as published from outbox where event_id = ?",
          [eventId],
        );
    expect(await published()).toEqual([{ published: false }]);
    await orm.em.fork().execute("delete from outbox where event_id = ?", [eventId]);
  });

  describe("an event NATS keeps refusing", () => {
    // Before, a refused event and after: no stream takes the middle one's subject.
    const enqueueAround = async () => {
      const entries = ["test.before", "unstreamed.poison", "test.after"].map((subject) => ({
        subject,
        payload: new TextEncoder().encode(subject),
        eventId: randomUUID(),
      }));
      await orm.em.fork().transactional((em) => enqueueEvents(em, entries));
      return entries.map((e): string => e.eventId);
    };
    const pendingOf = async (ids: string[]) =>
      (
        await orm.em
          .fork()
          .execute<{ event_id: string }[]>(
            "select event_id from outbox where published_at is null and event_id in (?) order by seq",
            [ids],
          )
      ).map((row) => row.event_id);

    it("waits while the DEAD stream does not take it either, or until it is due", async () => {
      await bus.deleteStreams(["DEAD"]);
      const ids = await enqueueAround();
      // Due after one failed round but not stored: as while NATS is away, everything waits.
      const hasty = new OutboxRelay(orm, bus, logger, { giveUp: { attempts: 1, afterMs: 0 } });
      for (let round = 0; round < 3; round++) await expect(hasty.flush()).rejects.toThrow();
      expect(await pendingOf(ids)).toEqual(ids);
      // With the DEAD stream there, a relay still waits until the failures are old enough.
      await bus.ensureStreams(STREAMS.filter((stream) => stream.name === "DEAD"));
      const patient = new OutboxRelay(orm, bus, logger, {
        giveUp: { attempts: 1, afterMs: 60_000 },
      });
      for (let round = 0; round < 3; round++) await expect(patient.flush()).rejects.toThrow();
      expect(await pendingOf(ids)).toEqual(ids);
      await orm.em.fork().execute("delete from outbox where event_id in (?)", [ids]);
    });

    it("is never a full stream's refusal: those events wait, however long", async () => {
      await bus.ensureStreams(STREAMS.filter((stream) => stream.name === "DEAD"));
      const nc = await connect({ servers: natsUrl });
      const stream = `${namespace}_FULL`;
      try {
        const jsm = await jetstreamManager(nc);
        await jsm.streams.add({
          name: stream,
          subjects: [`${namespace}.full.>`],
          max_msgs: 1,
          discard: DiscardPolicy.New,
        });
        await bus.publish("full.first", new Uint8Array([1]), randomUUID());
        const eventId = randomUUID();
        await orm.em
          .fork()
          .transactional((em) =>
            enqueueEvents(em, [{ subject: "full.second", payload: new Uint8Array([2]), eventId }]),
          );
        const hasty = new OutboxRelay(orm, bus, logger, { giveUp: { attempts: 1, afterMs: 0 } });
        for (let round = 0; round < 3; round++) {
          await expect(hasty.flush()).rejects.toThrow("maximum messages exceeded");
        }
        expect(await pendingOf([eventId])).toEqual([eventId]);
        expect(
          await jsm.streams.getMessage(`${namespace}_DEAD`, {
            last_by_subj: `${namespace}.dead.outbox.kit_test`,
          }),
        ).toBeNull();
        // Room again: it goes out.
        await jsm.streams.purge(stream);
        await hasty.flush();
        expect(await pendingOf([eventId])).toEqual([]);
      } finally {
        await (await jetstreamManager(nc)).streams.delete(stream).catch(() => false);
        await nc.close();
      }
    });

    it("goes to the DEAD stream once due, and the events after it follow", async () => {
      await bus.ensureStreams(STREAMS.filter((stream) => stream.name === "DEAD"));
      const received: BusMessage[] = [];
      const consumer = await bus.consume(
        { stream: "TEST", durable: "kit_test_poison", subject: "test.>" },
        async (m) => {
          received.push(m);
        },
      );
      const ids = await enqueueAround();
      const [before, poison, after] = ids as [string, string, string];
      const relay = new OutboxRelay(orm, bus, logger, { giveUp: { attempts: 3, afterMs: 0 } });
      await expect(relay.flush()).rejects.toThrow();
      await expect(relay.flush()).rejects.toThrow();
      expect(await pendingOf(ids)).toEqual(ids);
      await relay.flush();
      expect(await pendingOf(ids)).toEqual([]);

      const nc = await connect({ servers: natsUrl });
      try {
        const dead = await (await jetstreamManager(nc)).streams.getMessage(`${namespace}_DEAD`, {
          last_by_subj: `${namespace}.dead.outbox.kit_test`,
        });
        expect(new TextDecoder().decode(dead!.data)).toBe("unstreamed.poison");
        expect(dead!.header.get(DEAD_LETTER_HEADERS.subject)).toBe("unstreamed.poison");
        expect(dead!.header.get(DEAD_LETTER_HEADERS.stream)).toBe("outbox:kit_test");
        expect(dead!.header.get(DEAD_LETTER_HEADERS.id)).toBe(poison);
        expect(dead!.header.get(DEAD_LETTER_HEADERS.deliveries)).toBe("3");
        expect(dead!.header.get(DEAD_LETTER_HEADERS.error)).not.toBe("");
      } finally {
        await nc.close();
      }
      // The events around it arrive, each once (the failed rounds' publishes were repeats); the
      // new consumer also gets the stream's earlier tests' events.
      const mine = () => received.filter((m) => ids.includes(m.id)).map((m) => m.id);
      await expect.poll(() => mine().length, { timeout: 5000 }).toBe(2);
      await new Promise((r) => setTimeout(r, 300));
      await consumer.stop();
      expect(mine()).toEqual([before, after]);
    });
  });

  it("writes events with a statement, in order, past one insert's worth too, or not at all", async () => {
    const entriesOf = (prefix: string, count: number) =>
      Array.from({ length: count }, (_, i) => ({
        subject: `test.with.${prefix}.${i}`,
        payload: new Uint8Array([i % 256]),
        eventId: randomUUID(),
      }));
    const stored = async (prefix: string) =>
      (
        await orm.em
          .fork()
          .execute<{ event_id: string }[]>(
            "select event_id from outbox where subject like ? order by seq",
            [`test.with.${prefix}.%`],
          )
      ).map((row) => row.event_id);
    const one = entriesOf("one", 2);
    const rows = await orm.em.fork().transactional((em) =>
      queryWithOutbox<{ sum: number }>(em, one, "select $1::int + $2::int as sum", [2, 3], {
        prepare: true,
      }),
    );
    expect(rows).toEqual([{ sum: 5 }]);
    expect(await stored("one")).toEqual(one.map((e) => e.eventId));

    // 5000 rows is one insert's worth: the first 5000 go on their own, then the rest with it.
    const many = entriesOf("many", 5003);
    await orm.em
      .fork()
      .transactional((em) => queryWithOutbox(em, many, "select $1::text as echo", ["x"]));
    expect(await stored("many")).toEqual(many.map((e) => e.eventId));

    await expect(
      orm.em.fork().transactional(async (em) => {
        await queryWithOutbox(em, entriesOf("undone", 3), "select 1", []);
        throw new Error("abort");
      }),
    ).rejects.toThrow("abort");
    expect(await stored("undone")).toEqual([]);
    await orm.em.fork().execute("delete from outbox where subject like 'test.with.%'");
  });
});
