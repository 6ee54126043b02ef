import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { DatabaseSchema as DatabaseMessage } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import { describe, expect, it } from "vitest";
import { presentDatabase } from "./database-presenters.js";
import { DatabaseSchema } from "./database-schemas.js";

describe("presentDatabase", () => {
  const valid = {
    databaseId: 9007199254740991n,
    organizationId: 3n,
    name: "CRM",
    description: "Leads\nand deals",
    createdAt: timestampFromDate(new Date("2026-11-21T10:15:00.123Z")),
    updatedAt: timestampFromDate(new Date("2026-11-22T08:00:00Z")),
  };

  it("writes the Database shape", () => {
    const database = presentDatabase(create(DatabaseMessage, valid));
    expect(database).toEqual({
      database_id: 9007199254740991,
      organization_id: 3,
      name: "CRM",
      description: "Leads\nand deals",
      created_at: "2026-11-21T10:15:00.123Z",
      updated_at: "2026-11-22T08:00:00.000Z",
    });
    expect(DatabaseSchema.parse(database)).toEqual(database);
  });

  it("refuses an answer that breaks the contract rather than guess (500)", () => {
    expect(() => presentDatabase(undefined)).toThrow(/database is missing/);
    expect(() =>
      presentDatabase(create(DatabaseMessage, { ...valid, updatedAt: undefined })),
    ).toThrow(/timestamp/);
    expect(() =>
      presentDatabase(create(DatabaseMessage, { ...valid, databaseId: 2n ** 53n })),
    ).toThrow(/JSON number/);
  });
});
