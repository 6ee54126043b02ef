import { fromBinary } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { createLogger, MemoryBus, SUBJECTS } from "@rowbase/kit";
import { Actor_Type } from "@rowbase/proto/rowbase/events/v1/envelope_pb";
import {
  type ApiCallsCounted,
  ApiCallsCountedSchema,
} from "@rowbase/proto/rowbase/events/v1/usage_events_pb";
import { afterEach, describe, expect, it } from "vitest";
import type { ApiTokenCaller, SessionCaller } from "../auth/authenticate.js";
import { ApiCallTally } from "./api-call-tally.js";

const ORG = 5n;
const token: ApiTokenCaller = {
  kind: "api_token",
  tokenId: 11n,
  organizationId: ORG,
  access: "read_write",
};
const member: SessionCaller = { kind: "user", userId: 3n, sessionId: "s-1" };
const otherMember: SessionCaller = { kind: "user", userId: 4n, sessionId: "s-2" };

/** A bus that refuses the next `failures` publishes, as NATS does while it is away. */
class FlakyBus extends MemoryBus {
  failures = 0;
  override async publish(subject: string, data: Uint8Array, id: string): Promise<void> {
    if (this.failures > 0) {
      this.failures -= 1;
      throw new Error("nats away");
    }
    await super.publish(subject, data, id);
  }
}

async function setUp(now: () => Date) {
  const bus = new FlakyBus(createLogger("bus", "silent"));
  const events: ApiCallsCounted[] = [];
  await bus.consume(
    { stream: "USAGE", durable: "test", subject: SUBJECTS.apiCallsCounted },
    async (message) => {
      events.push(fromBinary(ApiCallsCountedSchema, message.data));
    },
  );
  // A long interval: the test flushes by hand.
  const tally = new ApiCallTally(bus, createLogger("usage", "silent"), 3_600_000, now);
  return { bus, events, tally };
}

/** The memory bus hands messages to its consumers asynchronously. */
const delivered = () => new Promise((resolve) => setTimeout(resolve, 10));

const summary = (events: ApiCallsCounted[]) =>
  events
    .map((event) => ({
      organizationId: event.organizationId,
      tokenId: event.tokenId,
      actor: [event.meta?.actor?.type, event.meta?.actor?.id],
      day: event.meta?.occurredAt && timestampDate(event.meta.occurredAt).toISOString(),
      calls: event.apiCalls,
    }))
    .sort((a, b) => Number(a.actor[1]) - Number(b.actor[1]));

describe("ApiCallTally", () => {
  let close: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await close?.();
    close = undefined;
  });

  it("publishes one sum per organization, caller and UTC day", async () => {
    let now = new Date("2026-11-21T23:59:59.500Z");
    const { events, tally } = await setUp(() => now);
    close = () => tally.close();
    tally.add(token, ORG);
    tally.add(token, ORG);
    tally.add(member, ORG);
    tally.add(otherMember, ORG);
    tally.add(member, ORG);
    tally.add(member, 6n);
    now = new Date("2026-11-22T00:00:00.250Z");
    tally.add(token, ORG);
    await tally.flush();
    await delivered();

    const before = "2026-11-21T23:59:59.500Z";
    const after = "2026-11-22T00:00:00.250Z";
    expect(summary(events)).toEqual(
      expect.arrayContaining([
        { organizationId: ORG, tokenId: 0n, actor: [Actor_Type.USER, 3n], day: before, calls: 2n },
        { organizationId: 6n, tokenId: 0n, actor: [Actor_Type.USER, 3n], day: before, calls: 1n },
        { organizationId: ORG, tokenId: 0n, actor: [Actor_Type.USER, 4n], day: before, calls: 1n },
        {
          organizationId: ORG,
          tokenId: 11n,
          actor: [Actor_Type.API_TOKEN, 11n],
          day: before,
          calls: 2n,
        },
        {
          organizationId: ORG,
          tokenId: 11n,
          actor: [Actor_Type.API_TOKEN, 11n],
          day: after,
          calls: 1n,
        },
      ]),
    );
    expect(events).toHaveLength(5);

    // Counted once: the next flush has nothing to send.
    await tally.flush();
    await delivered();
    expect(events).toHaveLength(5);
  });

  it("publishes a refused event again under the same id, and only once", async () => {
    const { bus, events, tally } = await setUp(() => new Date("2026-11-22T10:00:00Z"));
    close = () => tally.close();
    bus.failures = 1;
    tally.add(token, ORG);
    await tally.flush();
    await delivered();
    expect(events).toEqual([]);

    tally.add(token, ORG);
    await tally.flush();
    await delivered();
    expect(events.map((event) => event.apiCalls)).toEqual([1n, 1n]);
    await tally.flush();
    await delivered();
    expect(events).toHaveLength(2);
  });

  it("publishes what is left when it closes", async () => {
    const { events, tally } = await setUp(() => new Date("2026-11-22T10:00:00Z"));
    tally.add(member, ORG);
    tally.add(member, ORG);
    await tally.close();
    await delivered();
    expect(summary(events)).toMatchObject([{ calls: 2n, actor: [Actor_Type.USER, 3n] }]);
  });

  it("with an interval of 0, publishes after the event-loop turn that counted", async () => {
    const bus = new MemoryBus(createLogger("bus", "silent"));
    const events: ApiCallsCounted[] = [];
    await bus.consume(
      { stream: "USAGE", durable: "test", subject: SUBJECTS.apiCallsCounted },
      async (message) => {
        events.push(fromBinary(ApiCallsCountedSchema, message.data));
      },
    );
    const tally = new ApiCallTally(bus, createLogger("usage", "silent"), 0);
    close = () => tally.close();
    tally.add(token, ORG);
    tally.add(token, ORG);
    expect(events).toEqual([]);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(events.map((event) => event.apiCalls)).toEqual([2n]);
  });
});
