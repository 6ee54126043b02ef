import { create, fromJson } from "@bufbuild/protobuf";
import { timestampFromDate, ValueSchema } from "@bufbuild/protobuf/wkt";
import {
  AuditLogEntry_Actor_Type,
  AuditLogEntry_ActorSchema,
  AuditLogEntry_ChangeSchema,
  AuditLogEntry_TargetSchema,
  AuditLogEntrySchema,
} from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import { ListAuditEventsResponseSchema } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { describe, expect, it } from "vitest";
import { presentAuditEvent, presentAuditList } from "./audit-presenters.js";
import { AuditEventSchema, AuditListSchema } from "./audit-schemas.js";

const at = new Date("2026-11-21T10:15:00.123Z");
const value = (json: unknown) => fromJson(ValueSchema, json as never);

function entry(init: Record<string, unknown> = {}) {
  return create(AuditLogEntrySchema, {
    eventId: "0193a4c2-0000-7000-8000-000000000001",
    at: timestampFromDate(at),
    organizationId: 11n,
    databaseId: 22n,
    tableId: 33n,
    actor: create(AuditLogEntry_ActorSchema, { type: AuditLogEntry_Actor_Type.USER, id: 5n }),
    action: "record.updated",
    target: create(AuditLogEntry_TargetSchema, { type: "record", id: 44n }),
    changes: [
      create(AuditLogEntry_ChangeSchema, {
        key: "12",
        label: "Name",
        oldValue: value("Ada"),
        newValue: value("Grace"),
      }),
    ],
    ...init,
  });
}

describe("audit presenters", () => {
  it("write a record change in the AuditEvent shape, keyed by field id with its label", () => {
    const event = presentAuditEvent(entry());
    expect(event).toEqual({
      event_id: "0193a4c2-0000-7000-8000-000000000001",
      at: "2026-11-21T10:15:00.123Z",
      organization_id: 11,
      database_id: 22,
      table_id: 33,
      actor: { type: "user", id: 5 },
      action: "record.updated",
      target: { type: "record", id: 44 },
      changes: [{ key: "12", label: "Name", old: "Ada", new: "Grace" }],
    });
    expect(AuditEventSchema.parse(event)).toEqual(event);
  });

  it("leave out the scopes a target is not in, and labels that were not given", () => {
    const event = presentAuditEvent(
      entry({
        databaseId: 0n,
        tableId: 0n,
        actor: create(AuditLogEntry_ActorSchema, {
          type: AuditLogEntry_Actor_Type.API_TOKEN,
          id: 9n,
        }),
        action: "member.updated",
        target: create(AuditLogEntry_TargetSchema, { type: "member", id: 3n }),
        changes: [
          create(AuditLogEntry_ChangeSchema, {
            key: "role",
            oldValue: value("viewer"),
            newValue: value("editor"),
          }),
        ],
      }),
    );
    expect(Object.keys(event)).not.toContain("database_id");
    expect(Object.keys(event)).not.toContain("table_id");
    expect(event.actor).toEqual({ type: "api_token", id: 9 });
    expect(event.changes).toEqual([{ key: "role", old: "viewer", new: "editor" }]);
    expect(AuditEventSchema.parse(event)).toEqual(event);
  });

  it("write an unset old or new value as null, and any JSON value as it is", () => {
    const event = presentAuditEvent(
      entry({
        changes: [
          create(AuditLogEntry_ChangeSchema, { key: "1", label: "A", newValue: value(3.5) }),
          create(AuditLogEntry_ChangeSchema, { key: "2", label: "B", oldValue: value(true) }),
          create(AuditLogEntry_ChangeSchema, {
            key: "3",
            label: "C",
            oldValue: value(null),
            newValue: value({ nested: [1, "two", null] }),
          }),
          create(AuditLogEntry_ChangeSchema, { key: "4", label: "D", newValue: value(["a"]) }),
        ],
      }),
    );
    expect(event.changes).toEqual([
      { key: "1", label: "A", old: null, new: 3.5 },
      { key: "2", label: "B", old: true, new: null },
      { key: "3", label: "C", old: null, new: { nested: [1, "two", null] } },
      { key: "4", label: "D", old: null, new: ["a"] },
    ]);
    // Both keys are always there.
    for (const change of event.changes) expect(Object.keys(change)).toContain("old");
  });

  it("name a system actor and a file's field", () => {
    const event = presentAuditEvent(
      entry({
        actor: create(AuditLogEntry_ActorSchema, { type: AuditLogEntry_Actor_Type.SYSTEM }),
        action: "file.deleted",
        target: create(AuditLogEntry_TargetSchema, { type: "file", id: 44n, fieldId: 12n }),
        changes: [],
      }),
    );
    expect(event.actor).toEqual({ type: "system", id: 0 });
    expect(event.target).toEqual({ type: "file", id: 44, field_id: 12 });
    expect(event.changes).toEqual([]);
  });

  it("write the page with its total", () => {
    const list = presentAuditList(
      create(ListAuditEventsResponseSchema, { events: [entry(), entry()], total: 120n }),
    );
    expect(list.total).toBe(120);
    expect(list.events).toHaveLength(2);
    expect(AuditListSchema.parse(list)).toEqual(list);
    expect(presentAuditList(create(ListAuditEventsResponseSchema, {}))).toEqual({
      events: [],
      total: 0,
    });
  });

  it("refuse an answer that breaks the contract rather than guess (500)", () => {
    expect(() => presentAuditEvent(entry({ actor: undefined }))).toThrow(/actor/);
    expect(() => presentAuditEvent(entry({ target: undefined }))).toThrow(/target/);
    expect(() => presentAuditEvent(entry({ at: undefined }))).toThrow(/timestamp/);
    expect(() =>
      presentAuditEvent(
        entry({
          actor: create(AuditLogEntry_ActorSchema, { type: AuditLogEntry_Actor_Type.UNSPECIFIED }),
        }),
      ),
    ).toThrow(/actor type/);
  });
});
