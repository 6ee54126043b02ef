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
  buildEvent,
  compactAuditEventId,
  compactAuditEvents,
  eventTraceparent,
  SUBJECTS,
} from "./events.js";
import { ensureTracing, inServerSpan } from "./tracing.js";

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
    const messages = await within("2bf92f3577b34da6a3ce929d0e0e4736", () =>
      compactAuditEvents(
        {
          organizationId: 7n,
          databaseId: 8n,
          tableId: 9n,
          action: "record.created",
          target: create(AuditEvent_TargetSchema, { type: "record" }),
        },
        [1n, 2n, 3n, 4n].map((targetId) => ({ targetId, changes: [{ key: "1", label: big }] })),
        {},
      ),
    );
    expect(messages.length).toBeGreaterThan(1);
    const traceparent = eventTraceparent(messages[0]!.subject, messages[0]!.payload);
    expect(traceparent).toContain("2bf92f3577b34da6a3ce929d0e0e4736");
    for (const message of messages) {
      expect(message.subject).toBe(SUBJECTS.auditBatch);
      expect(message.payload.length).toBeLessThanOrEqual(AUDIT_BATCH_BYTES);
      expect(eventTraceparent(message.subject, message.payload)).toBe(traceparent);
      const decoded = fromBinary(AuditEventBatchSchema, message.payload);
      expect(decoded.traceparent).toBe(traceparent);
      expect(decoded.common?.meta?.traceparent).toBe("");
    }
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
    changes: [{ key: "1", label: "Name", old: "a", new: "é".repeat(size) }],
  });

  it("sends a lone event as an ordinary event on its own subject", () => {
    const [message, ...more] = compactAuditEvents(common, [itemOf(1)], { requestId: "r1" });
    expect(more).toEqual([]);
    expect(message!.subject).toBe(SUBJECTS.audit("record.updated"));
    const event = fromBinary(AuditEventSchema, message!.payload);
    expect(event.meta?.eventId).toBe(message!.eventId);
    expect([event.target?.id, event.changesJson]).toEqual([
      1n,
      auditChangesJson(itemOf(1).changes),
    ]);
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
      items.map((item) => [item.targetId, auditChangesJson(item.changes), "record.updated", 9n]),
    );
    expect(new Set(events.map((e) => e.meta?.eventId)).size).toBe(600);
    expect(events[0]!.meta?.eventId).toBe(compactAuditEventId(messages[0]!.eventId, 0));
  });

  it("sends an item bigger than the budget in a message of its own", () => {
    // Under the changes' own limit (auditChangesJson), over the budget that the shared parts leave.
    const big = {
      targetId: 2n,
      changes: [{ key: "2", new: "y".repeat(AUDIT_BATCH_BYTES - 1024) }],
    };
    const messages = compactAuditEvents(common, [itemOf(1), big, itemOf(3)], {});
    expect(messages.map((m) => fromBinary(AuditEventBatchSchema, m.payload).targetIds)).toEqual([
      [1n],
      [2n],
      [3n],
    ]);
  });

  it("sends each label once per message, and a change whose label differs keeps its own", () => {
    const changesOf = (name: string, label: string) => [
      { key: "1", label, new: name },
      { key: "2", label: "Amount", new: 5 },
      { key: "*", label: "2 more not recorded" },
    ];
    // The third record was written after field 1 was renamed (a label of its own).
    const items = [
      { targetId: 1n, changes: changesOf("a", "Name") },
      { targetId: 2n, changes: changesOf("b", "Name") },
      { targetId: 3n, changes: changesOf("c", "Title") },
    ];
    const [message, ...more] = compactAuditEvents(common, items, {});
    expect(more).toEqual([]);
    const batch = fromBinary(AuditEventBatchSchema, message!.payload);
    expect(JSON.parse(batch.labelsJson)).toEqual({
      "1": "Name",
      "2": "Amount",
      "*": "2 more not recorded",
    });
    expect(JSON.parse(batch.changesJson)).toEqual([
      [{ key: "1", new: "a" }, { key: "2", new: 5 }, { key: "*" }],
      [{ key: "1", new: "b" }, { key: "2", new: 5 }, { key: "*" }],
      [{ key: "1", label: "Title", new: "c" }, { key: "2", new: 5 }, { key: "*" }],
    ]);
    expect(auditBatchEvents(batch, message!.eventId).map((event) => event.changesJson)).toEqual(
      items.map((item) => auditChangesJson(item.changes)),
    );
  });

  it("keeps labels in place when they are too long to share", () => {
    const label = "L".repeat(AUDIT_BATCH_BYTES / 2);
    const items = [1n, 2n].map((targetId) => ({ targetId, changes: [{ key: "1", label }] }));
    const batches = compactAuditEvents(common, items, {}).map((m) =>
      fromBinary(AuditEventBatchSchema, m.payload),
    );
    expect(batches.map((batch) => [batch.labelsJson, batch.targetIds])).toEqual([
      ["", [1n]],
      ["", [2n]],
    ]);
    expect(JSON.parse(batches[0]!.changesJson)).toEqual([[{ key: "1", label }]]);
  });

  it("makes an event's id a UUID of the message's id and the event's place, the same each time", () => {
    const id = compactAuditEventId("a1b2", 0);
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(compactAuditEventId("a1b2", 0)).toBe(id);
    expect(compactAuditEventId("a1b2", 1)).not.toBe(id);
    expect(compactAuditEventId("a1b3", 0)).not.toBe(id);
  });
});
