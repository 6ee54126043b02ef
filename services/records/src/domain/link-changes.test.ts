import type { SchemaField } from "@rowbase/kit";
import { describe, expect, it } from "vitest";
import { emptyLinksCleared, valueKey, withLinkIds } from "./link-changes.js";

const FIELDS: SchemaField[] = [
  { id: "1", name: "Name", type: "text", options: {}, required: false, description: "" },
  {
    id: "2",
    name: "Projects",
    type: "link",
    options: { table_id: 9, multiple: true, inverse_field_id: 3 },
    required: false,
    description: "",
  },
];

const record = (data: Record<string, unknown>) => ({
  rowId: 5n,
  tableId: 8n,
  data: data as never,
  createdAt: new Date(0),
  updatedAt: new Date(0),
});

describe("link values in changes", () => {
  it("are the linked row ids, none when nothing is linked", () => {
    const read = record({
      1: "Ada",
      2: [
        { row_id: 7, display: "Alpha" },
        { row_id: 9, display: "9" },
      ],
    });
    expect(withLinkIds(FIELDS, read).data).toEqual({ 1: "Ada", 2: [7, 9] });
    expect(withLinkIds(FIELDS, record({ 1: "Ada", 2: [] })).data).toEqual({ 1: "Ada" });
    expect(withLinkIds(FIELDS, record({ 2: [3, 4] })).data).toEqual({ 2: [3, 4] });
  });

  it("clear a link written empty, as null clears any value", () => {
    const values = new Map<string, never>([
      ["1", "x" as never],
      ["2", [] as never],
    ]);
    expect([...emptyLinksCleared(FIELDS, values)]).toEqual([
      ["1", "x"],
      ["2", null],
    ]);
  });

  it("are refused under the key the request named them by", () => {
    expect(valueKey(FIELDS, { projects: [1] }, FIELDS[1]!, "records.2.data.")).toBe(
      "records.2.data.projects",
    );
    expect(valueKey(FIELDS, { 2: [1] }, FIELDS[1]!, "")).toBe("2");
  });
});
