import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  ChangeType,
  RecordChangeSchema,
  RecordSchema,
} from "@rowbase/proto/rowbase/records/v1/records_pb";
import { describe, expect, it } from "vitest";
import {
  CHANGE_TYPES,
  changeJson,
  changeTypeName,
  changeTypeValue,
  recordJson,
} from "./change-json.js";

const at = timestampFromDate(new Date("2026-12-06T12:00:00.123Z"));

function change(type: ChangeType, extra: Partial<Parameters<typeof create>[1]> = {}) {
  return create(RecordChangeSchema, {
    changeId: "MTI6NDI",
    type,
    at,
    organizationId: 1n,
    databaseId: 2n,
    tableId: 12n,
    rowId: 7n,
    actor: { type: "api_token", id: 5n },
    ...extra,
  });
}

const record = create(RecordSchema, {
  rowId: 7n,
  tableId: 12n,
  createdAt: at,
  updatedAt: at,
  dataJson: '{"fld_a":"Won","fld_b":3}',
});

describe("changeJson", () => {
  it("writes an update with the record, previous and changed_fields, as valid JSON", () => {
    const text = changeJson(
      change(ChangeType.UPDATED, {
        record,
        previousJson: '{"fld_a":"Open"}',
        changedFields: ["fld_a"],
      }),
    );
    expect(JSON.parse(text)).toEqual({
      change_id: "MTI6NDI",
      type: "record.updated",
      at: "2026-12-06T12:00:00.123Z",
      organization_id: 1,
      database_id: 2,
      table_id: 12,
      row_id: 7,
      actor: { type: "api_token", id: 5 },
      record: {
        row_id: 7,
        table_id: 12,
        created_at: "2026-12-06T12:00:00.123Z",
        updated_at: "2026-12-06T12:00:00.123Z",
        data: { fld_a: "Won", fld_b: 3 },
      },
      previous: { fld_a: "Open" },
      changed_fields: ["fld_a"],
    });
  });

  it("leaves previous out of a creation, and writes a deletion's record as null", () => {
    const created = JSON.parse(changeJson(change(ChangeType.CREATED, { record })));
    expect(created).not.toHaveProperty("previous");
    expect(created).not.toHaveProperty("changed_fields");
    const deleted = JSON.parse(
      changeJson(change(ChangeType.DELETED, { previousJson: '{"fld_a":"Won"}' })),
    );
    expect(deleted.record).toBeNull();
    expect(deleted.previous).toEqual({ fld_a: "Won" });
    expect(deleted).not.toHaveProperty("changed_fields");
  });

  it("names every change type and takes each name back", () => {
    for (const name of CHANGE_TYPES) {
      expect(changeTypeName(change(changeTypeValue(name)))).toBe(name);
    }
    expect(() => changeJson(change(ChangeType.UNSPECIFIED))).toThrow(/unknown type/);
  });
});

describe("recordJson", () => {
  it("names the links cut only when a link was", () => {
    expect(JSON.parse(recordJson(record))).not.toHaveProperty("links_truncated");
    const cut = create(RecordSchema, { ...record, linksTruncated: ["12"] });
    expect(JSON.parse(recordJson(cut))).toMatchObject({
      data: { fld_b: 3 },
      links_truncated: ["12"],
    });
  });
});
