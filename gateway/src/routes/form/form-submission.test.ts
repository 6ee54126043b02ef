import { describe, expect, it } from "vitest";
import { ValidationFailed } from "../../errors/validation-failed.js";
import { BOT_TRAP_NAME, checkSubmission, type FormField } from "./form-submission.js";

const field = (id: number, name: string, type: FormField["type"], required = false): FormField => ({
  id: BigInt(id),
  name,
  type,
  required,
  description: "",
  options: {},
});

const FIELDS = [
  field(1, "Name", "text", true),
  field(2, "Count", "number"),
  field(3, "Agree", "boolean"),
  field(4, "Tags", "multi_select"),
  field(5, "At", "datetime"),
  field(6, "Day", "date"),
];

function refusal(run: () => unknown) {
  try {
    run();
  } catch (error) {
    if (error instanceof ValidationFailed) return error.items;
  }
  throw new Error("not refused");
}

describe("checkSubmission", () => {
  it("keys values by field id, from ids or names in any case", () => {
    expect(checkSubmission(FIELDS, { name: "Ada", "2": 3 }, false)).toEqual({
      bot: false,
      data: { "1": "Ada", "2": 3 },
    });
  });

  it("types an HTML form's texts by field type; an unticked checkbox is false", () => {
    expect(
      checkSubmission(
        FIELDS,
        { "1": " Ada ", "2": "12.50", "4": ["a", "", "b"], "5": "2026-01-02T03:04", "6": "" },
        true,
      ),
    ).toEqual({
      bot: false,
      data: { "1": "Ada", "2": 12.5, "3": false, "4": ["a", "b"], "5": "2026-01-02T03:04:00.000Z" },
    });
    expect(checkSubmission(FIELDS, { "1": "A", "3": "on", "4": "a" }, true)).toMatchObject({
      data: { "3": true, "4": ["a"] },
    });
    // A text that is no number is passed on for the record routes to refuse with their message.
    expect(checkSubmission(FIELDS, { "1": "A", "2": "many" }, true)).toMatchObject({
      data: { "2": "many" },
    });
  });

  it("refuses keys that are not the form's and missing required values, key by key", () => {
    expect(refusal(() => checkSubmission(FIELDS, { Other: 1, "99": 2 }, false))).toEqual([
      {
        key: "data.99",
        message: "is not a field of this form",
        source: "body",
        code: "unknown_key",
      },
      {
        key: "data.Other",
        message: "is not a field of this form",
        source: "body",
        code: "unknown_key",
      },
      { key: "data.Name", message: "is required", source: "body", code: "required" },
    ]);
    expect(refusal(() => checkSubmission(FIELDS, { "1": "  " }, true))).toEqual([
      { key: "data.Name", message: "is required", source: "body", code: "required" },
    ]);
  });

  it("answers a filled bot trap as a bot's, whatever else it holds", () => {
    expect(checkSubmission(FIELDS, { [BOT_TRAP_NAME]: "x", Other: 1 }, true)).toEqual({
      bot: true,
    });
    expect(checkSubmission(FIELDS, { [BOT_TRAP_NAME]: "", "1": "A" }, true)).toMatchObject({
      bot: false,
    });
  });
});
