import { create, fromBinary } from "@bufbuild/protobuf";
import {
  AuditEvent_TargetSchema,
  AuditEventBatchSchema,
  AuditEventSchema,
} from "@rowbase/proto/rowbase/events/v1/audit_events_pb";
import { RecordsDeletedSchema } from "@rowbase/proto/rowbase/events/v1/records_events_pb";
import { describe, expect, it } from "vitest";
import { auditChangesJson } from "./audit-changes.js";
import {
  AUDIT_BATCH_BYTES,
  auditBatchEvents,
  batchAuditEvents,
  buildAuditEvent,
  buildEvent,
  compactAuditEventId,
  compactAuditEvents,
  eventTraceparent,
  SUBJECTS,
} from "./events.js";
import { ensureTracing, inServerSpan } from "./tracing.js";

const auditOf = (rowId: number, label = "Name") =>
  buildAuditEvent(
    {
      organizationId: 7n,
      databaseId: 8n,
      tableId: 9n,
      action: "record.created",
      target: create(AuditEvent_TargetSchema, { type: "record", id: BigInt(rowId) }),
      changesJson: auditChangesJson([{ key: "1", label, new: "x" }]),
    },
    { requestId: "r1" },
  );

const eventIdOf = (event: ReturnType<typeof auditOf>) => event.meta?.eventId;

describe("batchAuditEvents", () => {
  it("sends a lone event as its own message on its own subject", () => {
    const event = auditOf(1);
    const [message, ...more] = batchAuditEvents([event]);
    expect(more).toEqual([]);
    expect(message!.subject).toBe(SUBJECTS.audit("record.created"));
    expect(message!.eventId).toBe(eventIdOf(event));
    expect(fromBinary(AuditEventSchema, message!.payload)).toEqual(event);
    expect(batchAuditEvents([])).toEqual([]);
  });

  it("sends several events as one audit.batch message that decodes to the same events, in order", () => {
    const events = [auditOf(1), auditOf(2), auditOf(3)];
    const messages = batchAuditEvents(events);
    expect(messages).toHaveLength(1);
    const [message] = messages;
    expect(message!.subject).toBe(SUBJECTS.auditBatch);
    expect(events.map(eventIdOf)).not.toContain(message!.eventId);
    expect(fromBinary(AuditEventBatchSchema, message!.payload).events).toEqual(events);
  });

  it("splits events over the size budget into several messages, none over it, all in order", () => {
    // About 10 KiB each: 100 of them need 4 messages of at most 256 KiB.
    const events = Array.from({ length: 100 }, (_, i) => auditOf(i + 1, "x".repeat(10_000)));
    const messages = batchAuditEvents(events);
    expect(messages.length).toBe(4);
    expect(new Set(messages.map((m) => m.eventId)).size).toBe(4);
    for (const message of messages) {
      expect(message.subject).toBe(SUBJECTS.auditBatch);
      expect(message.payload.length).toBeLessThanOrEqual(AUDIT_BATCH_BYTES);
    }
    const all = messages.flatMap((m) => fromBinary(AuditEventBatchSchema, m.payload).events);
    expect(all).toEqual(events);
  });

  it("sends an event bigger than the budget in a message of its own", () => {
    // Its changes as a service could not make them (auditChangesJson keeps them under the
    // budget): the event around them passes it anyway.
    const big = auditOf(2);
    big.changesJson = JSON.stringify([{ key: "1", label: "y".repeat(AUDIT_BATCH_BYTES + 1) }]);
    const messages = batchAuditEvents([auditOf(1), big, auditOf(3)]);
    expect(
      messages.map((m) =>
        fromBinary(AuditEventBatchSchema, m.payload).events.map((e) => e.target?.id),
      ),
    ).toEqual([[1n], [2n], [3n]]);
  });
});

describe("eventTraceparent", () => {
  ensureTracing();
  /** What `build` makes within a request of trace `traceId`. */
  const within = <T>(traceId: string, build: () => T) =>
    inServerSpan(
      {
        name: "request",
        header: (name) =>
          name === "traceparent" ? `00-${traceId}-00f067aa0ba902b7-01` : undefined,
      },
      async () => build(),
    );
  const deleted = () =>
    buildEvent(
      SUBJECTS.recordsDeleted,
      RecordsDeletedSchema,
      { organizationId: 7n, tableId: 9n, rowIds: [1n] },
      {},
    );

  it("reads the context of the work that wrote an event, whatever its type", async () => {
    const event = await within("1bf92f3577b34da6a3ce929d0e0e4736", deleted);
    const traceparent = eventTraceparent(event.subject, event.payload);
    expect(traceparent).toMatch(/^00-1bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-0[01]$/);
    expect(fromBinary(RecordsDeletedSchema, event.payload).meta?.traceparent).toBe(traceparent);
    // Written outside any trace, or not an event at all: no context.
    const untraced = deleted();
    expect(eventTraceparent(untraced.subject, untraced.payload)).toBe("");
    expect(eventTraceparent("ev.other", new TextEncoder().encode("not an event"))).toBe("");
    expect(eventTraceparent(SUBJECTS.auditBatch, new Uint8Array())).toBe("");
  });

  it("carries an audit batch's context once, in every message of it, not in its events", async () => {
    const big = "x".repeat(AUDIT_BATCH_BYTES / 3);
    const events = await within("2bf92f3577b34da6a3ce929d0e0e4736", () =>
      [1, 2, 3, 4].map((n) => {
        const event = auditOf(n);
        event.changesJson = JSON.stringify([{ key: "1", label: big }]);
        return event;
      }),
    );
    const traceparent = events[0]!.meta?.traceparent;
    expect(traceparent).toContain("2bf92f3577b34da6a3ce929d0e0e4736");
    const messages = batchAuditEvents(events);
    expect(messages.length).toBeGreaterThan(1);
    for (const message of messages) {
      expect(message.subject).toBe(SUBJECTS.auditBatch);
      expect(message.payload.length).toBeLessThanOrEqual(AUDIT_BATCH_BYTES);
      expect(eventTraceparent(message.subject, message.payload)).toBe(traceparent);
      const decoded = fromBinary(AuditEventBatchSchema, message.payload);
      expect(decoded.traceparent).toBe(traceparent);
      for (const event of decoded.events) expect(event.meta?.traceparent).toBe("");
    }
    // The events the change keeps are left as they were.
    expect(events.every((event) => event.meta?.traceparent === traceparent)).toBe(true);
  });
});

describe("compactAuditEvents", () => {
  const common = {
    organizationId: 7n,
    databaseId: 8n,
    tableId: 9n,
    action: "record.updated",
    target: create(AuditEvent_TargetSchema, { type: "record" }),
  };
  const itemOf = (rowId: number, size = 10) => ({
    targetId: BigInt(rowId),
    changesJson: auditChangesJson([{ key: "1", label: "Name", old: "a", new: "é".repeat(size) }]),
  });

  it("sends a lone event as an ordinary event on its own subject", () => {
    const [message, ...more] = compactAuditEvents(common, [itemOf(1)], { requestId: "r1" });
    expect(more).toEqual([]);
    expect(message!.subject).toBe(SUBJECTS.audit("record.updated"));
    const event = fromBinary(AuditEventSchema, message!.payload);
    expect(event.meta?.eventId).toBe(message!.eventId);
    expect([event.target?.id, event.changesJson]).toEqual([1n, itemOf(1).changesJson]);
    expect(compactAuditEvents(common, [], {})).toEqual([]);
  });

  it("sends many in compact messages under the budget that expand to the events, in order", () => {
    // About 2.2 budgets of changes: three messages, every item in one of them once.
    const items = Array.from({ length: 600 }, (_, i) => itemOf(i + 1, 900));
    const messages = compactAuditEvents(common, items, { requestId: "r1" });
    expect(messages).toHaveLength(3);
    const events = messages.flatMap((message) => {
      expect(message.subject).toBe(SUBJECTS.auditBatch);
      expect(message.payload.byteLength).toBeLessThan(3 * AUDIT_BATCH_BYTES);
      const batch = fromBinary(AuditEventBatchSchema, message.payload);
      expect(batch.events).toEqual([]);
      expect(batch.common?.meta?.eventId).toBe(message.eventId);
      expect(batch.common?.meta?.requestId).toBe("r1");
      return auditBatchEvents(batch, message.eventId);
    });
    expect(events.map((e) => [e.target?.id, e.changesJson, e.action, e.tableId])).toEqual(
      items.map((item) => [item.targetId, item.changesJson, "record.updated", 9n]),
    );
    expect(new Set(events.map((e) => e.meta?.eventId)).size).toBe(600);
    expect(events[0]!.meta?.eventId).toBe(compactAuditEventId(messages[0]!.eventId, 0));
  });

  it("makes an event's id a UUID of the message's id and the event's place, the same each time", () => {
    const id = compactAuditEventId("a1b2", 0);
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(compactAuditEventId("a1b2", 0)).toBe(id);
    expect(compactAuditEventId("a1b2", 1)).not.toBe(id);
    expect(compactAuditEventId("a1b3", 0)).not.toBe(id);
  });
});
