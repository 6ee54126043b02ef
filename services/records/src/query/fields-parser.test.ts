import { describe, expect, it } from "vitest";
import type { QueryField } from "./field-reference.js";
import { parseFields } from "./fields-parser.js";
import { QueryError } from "./query-error.js";

const FIELDS: QueryField[] = [
  { id: "1", name: "Name", type: "text" },
  { id: "2", name: "Age", type: "number" },
  { id: "3", name: "Size, net", type: "number" },
  { id: "4", name: 'Say "hi"', type: "text" },
  { id: "5", name: "created_at", type: "text" },
];

const ids = (text: string) => parseFields(text, FIELDS).map((field) => field.id);

function fieldsError(text: string): QueryError {
  try {
    parseFields(text, FIELDS);
  } catch (error) {
    if (error instanceof QueryError) return error;
    throw error;
  }
  throw new Error(`${text} parsed`);
}

describe("parseFields", () => {
  it.each([
    ["Name", ["1"]],
    ["Age,Name", ["2", "1"]],
    ["Age, 1 ,name", ["2", "1"]],
    ['"Size, net",Age', ["3", "2"]],
    ['"Say ""hi"""', ["4"]],
    ['Say "hi"', ["4"]],
    ["row_id,updated_at,Name", ["1"]],
    ["created_at", ["5"]],
    ["row_id", []],
  ])("%s", (text, expected) => {
    expect(ids(text)).toEqual(expected);
  });

  it("collapses repeats, by name or by id, keeping the first place", () => {
    expect(ids("Age,Name,2,AGE,1")).toEqual(["2", "1"]);
  });

  it.each([
    ["Nope", "unknown field 'Nope' at 1"],
    ["Name, Nope", "unknown field 'Nope' at 7"],
    ["99", "unknown field '99' at 1"],
    ["-Name", "unknown field '-Name' at 1"],
    ["Name,,Age", "expected a field reference at 6"],
    ['"Name', "unterminated quoted text at 1"],
    ['"Name"x', "expected ',' after the quoted name at 7"],
    ["", "must name at least one field"],
    ["😀,Nope", "unknown field '😀' at 1"],
    ["😀😀 , ,x", "expected a field reference at 6"],
  ])("%j is refused", (text, message) => {
    const error = fieldsError(text);
    expect(error.message).toBe(message);
    expect(error.key).toBe("fields");
    expect(error.toValidationIssue()).toEqual({
      key: "fields",
      message,
      source: "query",
      code: message.startsWith("unknown field") ? "not_found" : "invalid_syntax",
    });
  });
});
