import { create, toBinary } from "@bufbuild/protobuf";
import { Code, SUBJECTS } from "@rowbase/kit";
import { FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import { FieldCreatedSchema } from "@rowbase/proto/rowbase/events/v1/catalog_events_pb";
import { EventMetaSchema } from "@rowbase/proto/rowbase/events/v1/envelope_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  as,
  failureOf,
  type Harness,
  SERVICE,
  startHarness,
  type Team,
  team,
  token,
  validationOf,
} from "./harness.js";

// ApplyCatalogEvent: catalog hands records an event it has just committed; records applies it
// once, whoever comes first, the call or the bus; only services may call it, with catalog's
// subjects and an event id.

let h: Harness;
let t: Team;

beforeAll(async () => {
  h = await startHarness();
  t = await team(h);
});

afterAll(async () => {
  await h?.stop();
});

function fieldCreated(eventId: string) {
  return toBinary(
    FieldCreatedSchema,
    create(FieldCreatedSchema, {
      meta: create(EventMetaSchema, { eventId }),
      organizationId: t.organizationId,
      databaseId: 1n,
      tableId: 999_999n,
      fieldId: 999_998n,
      type: FieldType.TEXT,
    }),
  );
}

describe("ApplyCatalogEvent", () => {
  it("applies an event once, however often it is handed over", async () => {
    const eventId = crypto.randomUUID();
    const request = { subject: SUBJECTS.fieldCreated, payload: fieldCreated(eventId), eventId };
    expect(await h.records.applyCatalogEvent(request, await as(SERVICE))).toMatchObject({
      applied: true,
    });
    expect(await h.records.applyCatalogEvent(request, await as(SERVICE))).toMatchObject({
      applied: false,
    });
  });

  it("refuses what is not a catalog event, and callers that are not services", async () => {
    const eventId = crypto.randomUUID();
    expect(
      await validationOf(
        h.records.applyCatalogEvent(
          { subject: SUBJECTS.organizationDeleted, payload: new Uint8Array(), eventId: "42" },
          await as(SERVICE),
        ),
      ),
    ).toEqual([
      {
        key: "subject",
        message: "must be a catalog event's subject",
        source: "body",
        code: "invalid_value",
      },
      { key: "event_id", message: "must be a UUID", source: "body", code: "invalid_value" },
    ]);
    const request = { subject: SUBJECTS.fieldCreated, payload: fieldCreated(eventId), eventId };
    for (const caller of [token(t.organizationId, "read_write"), t.owner]) {
      const failure = await failureOf(h.records.applyCatalogEvent(request, await as(caller)));
      expect(failure.code).toBe(Code.PermissionDenied);
    }
    // Refused, it was not applied: a service's call still applies it.
    expect(await h.records.applyCatalogEvent(request, await as(SERVICE))).toMatchObject({
      applied: true,
    });
  });
});
