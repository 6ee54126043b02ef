import { AsyncLocalStorage } from "node:async_hooks";
import { afterAll, describe, expect, it } from "vitest";
import {
  type BusMessage,
  createLogger,
  type EventBus,
  MemoryBus,
  NatsBus,
  subjectMatches,
} from "../src/index.js";
import { testInfra, uniqueName } from "../src/testing.js";

const logger = createLogger("kit-test", "silent");
const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

async function natsBus(options: { ackWaitMs?: number } = {}): Promise<EventBus> {
  const bus = await NatsBus.connect(
    (await testInfra()).natsUrl,
    logger,
    uniqueName("kit"),
    options,
  );
  cleanups.push(async () => {
    await bus.deleteStreams(["EVENTS"]);
    await bus.close();
  });
  return bus;
}

const encode = (text: string) => new TextEncoder().encode(text);
const decode = (data: Uint8Array) => new TextDecoder().decode(data);

// The in-process stand-in keeps JetStream's contract: dedup by id, redelivery after a failure.
describe.each([
  ["nats", natsBus],
  ["memory", async () => new MemoryBus(logger) as EventBus],
])("%s bus", (_kind, make) => {
  it("delivers matching subjects once per id and redelivers after a failing handler", async () => {
    const bus = await make();
    await bus.ensureStreams([{ name: "EVENTS", subjects: ["ev.>"], maxAgeSeconds: 600 }]);
    const seen: BusMessage[] = [];
    let failures = 0;
    const consumer = await bus.consume(
      { stream: "EVENTS", durable: "test", subject: "ev.order.*" },
      async (m) => {
        if (decode(m.data) === "flaky" && failures++ === 0) throw new Error("first try fails");
        seen.push(m);
      },
    );
    await bus.publish("ev.order.created", encode("one"), "id-1");
    await bus.publish("ev.order.created", encode("one again"), "id-1");
    await bus.publish("ev.customer.created", encode("other subject"), "id-2");
    await bus.publish("ev.order.paid", encode("flaky"), "id-3");
    await expect.poll(() => seen.length, { timeout: 10_000 }).toBe(2);
    await new Promise((r) => setTimeout(r, 300));
    await consumer.stop();
    expect(seen.map((m) => [m.subject, decode(m.data), m.id])).toEqual([
      ["ev.order.created", "one", "id-1"],
      ["ev.order.paid", "flaky", "id-3"],
    ]);
    expect(seen[1]!.deliveryCount).toBe(2);
    if (bus instanceof MemoryBus) await bus.close();
  });

  it("keeps the order of one-at-a-time consumers when a handler fails", async () => {
    const bus = await make();
    await bus.ensureStreams([{ name: "EVENTS", subjects: ["ev.>"], maxAgeSeconds: 600 }]);
    const applied: string[] = [];
    let failures = 0;
    const consumer = await bus.consume(
      { stream: "EVENTS", durable: "ordered", subject: "ev.field.*" },
      async (m) => {
        if (decode(m.data) === "first" && failures++ === 0) throw new Error("first try fails");
        applied.push(decode(m.data));
      },
    );
    await bus.publish("ev.field.changed", encode("first"), "ord-1");
    await bus.publish("ev.field.changed", encode("second"), "ord-2");
    await expect.poll(() => applied.length, { timeout: 10_000 }).toBe(2);
    await consumer.stop();
    // The second waits for the first's redelivery: a type change applied before the one it
    // follows would convert values from the wrong type.
    expect(applied).toEqual(["first", "second"]);
    if (bus instanceof MemoryBus) await bus.close();
  });
});

describe("nats bus, one at a time", () => {
  it("keeps the order when a handler fails longer than its tries in place", async () => {
    const bus = await natsBus();
    await bus.ensureStreams([{ name: "EVENTS", subjects: ["ev.>"], maxAgeSeconds: 600 }]);
    const applied: string[] = [];
    let failures = 0;
    const consumer = await bus.consume(
      { stream: "EVENTS", durable: "ordered-outage", subject: "ev.field.*" },
      async (m) => {
        // Its database is away for the four tries in place: JetStream redelivers it later.
        if (decode(m.data) === "first" && failures++ < 4) throw new Error("database away");
        applied.push(decode(m.data));
      },
    );
    await bus.publish("ev.field.changed", encode("first"), "out-1");
    await bus.publish("ev.field.changed", encode("second"), "out-2");
    await expect.poll(() => applied.length, { timeout: 15_000, interval: 100 }).toBe(2);
    await consumer.stop();
    expect(applied).toEqual(["first", "second"]);
    expect(failures).toBe(5);
  });

  it("keeps a message its handler is still working on from being handed out again", async () => {
    const bus = await natsBus({ ackWaitMs: 1000 });
    await bus.ensureStreams([{ name: "EVENTS", subjects: ["ev.>"], maxAgeSeconds: 600 }]);
    const handled: number[] = [];
    const consumer = await bus.consume(
      { stream: "EVENTS", durable: "ordered-long", subject: "ev.field.*" },
      async (m) => {
        handled.push(m.deliveryCount);
        await new Promise((resolve) => setTimeout(resolve, 2500));
      },
    );
    await bus.publish("ev.field.changed", encode("large"), "long-1");
    await expect.poll(() => handled.length, { timeout: 5000 }).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 3500));
    await consumer.stop();
    expect(handled).toEqual([1]);
  });

  it("hands one message at a time to the replicas sharing a consumer", async () => {
    const bus = await natsBus();
    await bus.ensureStreams([{ name: "EVENTS", subjects: ["ev.>"], maxAgeSeconds: 600 }]);
    const applied: string[] = [];
    let busy = 0;
    let most = 0;
    const handler = async (m: BusMessage) => {
      busy += 1;
      most = Math.max(most, busy);
      await new Promise((resolve) => setTimeout(resolve, 50));
      applied.push(decode(m.data));
      busy -= 1;
    };
    const spec = { stream: "EVENTS", durable: "ordered-replicas", subject: "ev.field.*" };
    // The durable exists from a version that let it hold many messages: it is brought to one.
    await (await bus.consume({ ...spec, concurrency: 4 }, handler)).stop();
    const replicas = [await bus.consume(spec, handler), await bus.consume(spec, handler)];
    const sent = Array.from({ length: 12 }, (_, i) => String(i));
    for (const text of sent) await bus.publish("ev.field.changed", encode(text), `rep-${text}`);
    await expect.poll(() => applied.length, { timeout: 15_000, interval: 100 }).toBe(12);
    for (const replica of replicas) await replica.stop();
    expect(applied).toEqual(sent);
    expect(most).toBe(1);
  });
});

describe("memory bus retries", () => {
  it("wait between tries, so that a handler failing for a moment does not lose the event", async () => {
    const bus = new MemoryBus(logger);
    const failUntil = Date.now() + 300;
    const applied: string[] = [];
    const dead: string[] = [];
    const consumer = await bus.consume(
      { stream: "EVENTS", durable: "brief", subject: "ev.>" },
      async (m) => {
        if (Date.now() < failUntil) throw new Error("the database restarts");
        applied.push(decode(m.data));
      },
    );
    const deadLetters = await bus.consume(
      { stream: "DEAD", durable: "watch", subject: "dead.>" },
      async (m) => {
        dead.push(m.subject);
      },
    );
    await bus.publish("ev.kept", encode("kept"), "brief-1");
    await expect.poll(() => applied, { timeout: 5000 }).toEqual(["kept"]);
    expect(dead).toEqual([]);
    await consumer.stop();
    await deadLetters.stop();
    await bus.close();
  });
});

describe("memory bus held while a process starts", () => {
  it("keeps what is published until released, for consumers that subscribe meanwhile", async () => {
    const bus = new MemoryBus(logger);
    bus.hold();
    await bus.publish("ev.early", encode("before anyone listened"), "held-1");
    const seen: string[] = [];
    const consumer = await bus.consume(
      { stream: "EVENTS", durable: "late", subject: "ev.>" },
      async (m) => {
        seen.push(decode(m.data));
      },
    );
    await new Promise((r) => setTimeout(r, 50));
    expect(seen).toEqual([]);
    bus.release();
    await bus.publish("ev.later", encode("after"), "held-2");
    await expect.poll(() => seen).toEqual(["before anyone listened", "after"]);
    await consumer.stop();
    await bus.close();
  });
});

describe("nats bus with concurrency", () => {
  it("works on that many messages at once, acknowledges each, and redelivers only the failed one", async () => {
    const bus = await natsBus();
    await bus.ensureStreams([{ name: "EVENTS", subjects: ["ev.>"], maxAgeSeconds: 600 }]);
    // Every handler waits until four are running: with fewer at once none would ever finish.
    let running = 0;
    let release = () => {};
    const allRunning = new Promise<void>((resolve) => {
      release = resolve;
    });
    const seen: string[] = [];
    let failed = false;
    const consumer = await bus.consume(
      { stream: "EVENTS", durable: "test_parallel", subject: "ev.>", concurrency: 4 },
      async (m) => {
        running += 1;
        if (running === 4) release();
        await allRunning;
        if (decode(m.data) === "two" && !failed) {
          failed = true;
          throw new Error("fails once");
        }
        seen.push(`${decode(m.data)}:${m.deliveryCount}`);
      },
    );
    for (const word of ["one", "two", "three", "four", "five", "six"]) {
      await bus.publish(`ev.${word}`, encode(word), `parallel-${word}`);
    }
    await expect.poll(() => seen.length, { timeout: 10_000 }).toBe(6);
    // Acknowledged messages are not delivered again (the ack wait is far longer than this).
    await new Promise((r) => setTimeout(r, 500));
    await consumer.stop();
    expect(seen.sort()).toEqual(["five:1", "four:1", "one:1", "six:1", "three:1", "two:2"]);
  });
});

describe("nats bus in batches", () => {
  it("hands over what arrived while busy, within the byte budget, and splits a failed batch", async () => {
    const bus = await natsBus();
    await bus.ensureStreams([{ name: "EVENTS", subjects: ["ev.>"], maxAgeSeconds: 600 }]);
    let release = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const calls: string[][] = [];
    const applied: string[][] = [];
    const consumer = await bus.consumeBatches(
      // 5-byte messages: the third one passes 12 bytes and is the last of its batch.
      {
        stream: "EVENTS",
        durable: "test_batches",
        subject: "ev.>",
        batch: { messages: 10, bytes: 12 },
      },
      async (messages) => {
        const words = messages.map((m) => decode(m.data));
        calls.push(words);
        await gate;
        // Each call takes a while: the queue refills up to its bound (one batch: 12 bytes, here
        // 3 messages) before the worker takes the next batch.
        await new Promise((r) => setTimeout(r, 50));
        // A batch with this one fails; alone it goes through.
        if (words.length > 1 && words.includes("bad-5")) throw new Error("batch refused");
        applied.push(words);
      },
    );
    await bus.publish("ev.first", encode("msg-1"), "batch-1");
    await expect.poll(() => calls.length, { timeout: 10_000 }).toBe(1);
    for (const word of ["msg-2", "msg-3", "msg-4", "bad-5", "msg-6", "msg-7", "msg-8"]) {
      await bus.publish("ev.more", encode(word), `batch-${word}`);
    }
    // All of them are in the client's buffer before the first batch is done.
    await new Promise((r) => setTimeout(r, 300));
    release();
    await expect.poll(() => applied.flat().length, { timeout: 10_000 }).toBe(8);
    // Acknowledged messages are not delivered again (the ack wait is far longer than this).
    await new Promise((r) => setTimeout(r, 500));
    await consumer.stop();
    expect(applied).toEqual([
      ["msg-1"],
      ["msg-2", "msg-3", "msg-4"],
      ["bad-5"],
      ["msg-6"],
      ["msg-7"],
      ["msg-8"],
    ]);
    expect(calls.slice(0, 3)).toEqual([
      ["msg-1"],
      ["msg-2", "msg-3", "msg-4"],
      ["bad-5", "msg-6", "msg-7"],
    ]);
  });
});

describe("subjectMatches", () => {
  it("follows NATS wildcard rules", () => {
    expect(subjectMatches("a.>", "a.b.c")).toBe(true);
    expect(subjectMatches("a.>", "a")).toBe(false);
    expect(subjectMatches("a.*.c", "a.b.c")).toBe(true);
    expect(subjectMatches("a.*", "a.b.c")).toBe(false);
    expect(subjectMatches("a.b", "a.b")).toBe(true);
  });
});

describe("memory bus delivery context", () => {
  it("runs handlers in the consumer's async context, not the publisher's", async () => {
    const storage = new AsyncLocalStorage<string>();
    const bus = new MemoryBus(logger);
    const seen: (string | undefined)[] = [];
    const consumer = await bus.consume(
      { stream: "EVENTS", durable: "ctx", subject: "ev.>" },
      async () => {
        seen.push(storage.getStore());
      },
    );
    await storage.run("publisher's transaction", () => bus.publish("ev.x", encode("x"), "ctx-1"));
    await consumer.stop();
    expect(seen).toEqual([undefined]);
    await bus.close();
  });
});
