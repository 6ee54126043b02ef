import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { TableSchema as TableMessage } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import { describe, expect, it } from "vitest";
import { presentTable } from "./table-presenters.js";
import { TableSchema } from "./table-schemas.js";

describe("presentTable", () => {
  const valid = {
    tableId: 12n,
    databaseId: 4n,
    name: "Leads",
    description: "",
    createdAt: timestampFromDate(new Date("2026-11-21T10:15:00.123Z")),
    updatedAt: timestampFromDate(new Date("2026-11-21T10:15:00.123Z")),
  };

  it("writes the Table shape, an empty description as an empty string", () => {
    const table = presentTable(create(TableMessage, valid));
    expect(table).toEqual({
      table_id: 12,
      database_id: 4,
      name: "Leads",
      description: "",
      created_at: "2026-11-21T10:15:00.123Z",
      updated_at: "2026-11-21T10:15:00.123Z",
    });
    expect(TableSchema.parse(table)).toEqual(table);
  });

  it("refuses an answer that breaks the contract rather than guess (500)", () => {
    expect(() => presentTable(undefined)).toThrow(/table is missing/);
    expect(() => presentTable(create(TableMessage, { ...valid, createdAt: undefined }))).toThrow(
      /timestamp/,
    );
  });
});
