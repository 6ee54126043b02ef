import { describe, expect, it } from "vitest";
import { z } from "zod";
import { itemsFromIssues } from "../errors/validation-failed.js";
import { jsonObject, MAX_JSON_DEPTH } from "./json-object.js";

const Body = z.strictObject({ options: jsonObject.optional() });

function parse(value: unknown) {
  const result = Body.safeParse(value, { reportInput: true });
  return result.success
    ? { ok: true as const, value: result.data }
    : { ok: false as const, items: itemsFromIssues(result.error.issues, "body") };
}

/** `{"a": {"a": ... {}}}` with `levels` objects in all. */
function nested(levels: number): Record<string, unknown> {
  let value: Record<string, unknown> = {};
  for (let i = 1; i < levels; i++) value = { a: value };
  return value;
}

describe("a free-form JSON object", () => {
  it("passes any JSON object through unchanged, and may be left out", () => {
    const options = {
      choices: [{ name: "Open", color: "green", id: "c1" }, { name: "Done" }],
      decimals: 2,
      min: -1.5,
      flag: false,
      none: null,
      nested: { list: [[1, "two", { three: 3 }]] },
    };
    expect(parse({ options })).toEqual({ ok: true, value: { options } });
    expect(parse({ options: {} })).toEqual({ ok: true, value: { options: {} } });
    expect(parse({})).toEqual({ ok: true, value: {} });
  });

  it("says a required one that is missing is required", () => {
    const result = z.strictObject({ data: jsonObject }).safeParse({}, { reportInput: true });
    expect(result.success ? [] : itemsFromIssues(result.error.issues, "body")).toEqual([
      { key: "data", message: "is required", source: "body", code: "invalid_value" },
    ]);
  });

  it("refuses anything but an object with the key of the value", () => {
    for (const options of [[], [1], "text", 5, true, null]) {
      expect({ options, result: parse({ options }) }).toEqual({
        options,
        result: {
          ok: false,
          items: [
            {
              key: "options",
              message: "must be a JSON object",
              source: "body",
              code: "invalid_value",
            },
          ],
        },
      });
    }
  });

  it("takes nesting up to MAX_JSON_DEPTH levels and refuses deeper, however deep the input", () => {
    expect(parse({ options: nested(MAX_JSON_DEPTH) }).ok).toBe(true);
    const tooDeep = parse({ options: nested(MAX_JSON_DEPTH + 1) });
    expect(tooDeep).toEqual({
      ok: false,
      items: [
        {
          key: ["options", ...Array(MAX_JSON_DEPTH).fill("a")].join("."),
          message: `must not nest more than ${MAX_JSON_DEPTH} levels deep`,
          source: "body",
          code: "invalid_value",
        },
      ],
    });
    // Far deeper than the stack would allow an unbounded recursive walk (or a Struct encoder) to go.
    const hostile = JSON.parse(`{"options": ${'{"a":'.repeat(200_000)}1${"}".repeat(200_000)}}`);
    expect(parse(hostile)).toMatchObject({ ok: false, items: [{ source: "body" }] });
    const arrays = JSON.parse(`{"options": {"a": ${"[".repeat(100)}${"]".repeat(100)}}}`);
    expect(parse(arrays)).toMatchObject({
      ok: false,
      items: [{ message: `must not nest more than ${MAX_JSON_DEPTH} levels deep` }],
    });
  });

  it("names every value a Struct could not carry as sent", () => {
    // JSON.parse reads an out-of-range number as Infinity.
    expect(parse(JSON.parse('{"options": {"ok": 1, "max": 1e400}}'))).toEqual({
      ok: false,
      items: [
        {
          key: "options.max",
          message: "must be a finite number",
          source: "body",
          code: "invalid_value",
        },
      ],
    });
    expect(
      parse(JSON.parse('{"options": {"choices": [{"name": "a"}, {"__proto__": {}}]}}')),
    ).toEqual({
      ok: false,
      items: [
        {
          key: "options.choices.1.__proto__",
          message: "is not allowed",
          source: "body",
          code: "invalid_value",
        },
      ],
    });
    expect(parse({ options: { at: new Date(0) } })).toEqual({
      ok: false,
      items: [
        {
          key: "options.at",
          message: "must be a JSON value",
          source: "body",
          code: "invalid_value",
        },
      ],
    });
    expect(parse({ options: { a: [1, undefined] } })).toEqual({
      ok: false,
      items: [
        {
          key: "options.a.1",
          message: "must be a JSON value",
          source: "body",
          code: "invalid_value",
        },
      ],
    });
    expect(parse({ options: { a: Number.NaN, b: Number.POSITIVE_INFINITY } })).toEqual({
      ok: false,
      items: [
        {
          key: "options.a",
          message: "must be a finite number",
          source: "body",
          code: "invalid_value",
        },
        {
          key: "options.b",
          message: "must be a finite number",
          source: "body",
          code: "invalid_value",
        },
      ],
    });
    // An unpaired surrogate (a `\ud800` escape) would reach the service as U+FFFD.
    const surrogate = "must be valid Unicode (no unpaired surrogates)";
    expect(parse(JSON.parse('{"options": {"ok": "😀", "a": ["x\\ud800"]}}'))).toEqual({
      ok: false,
      items: [{ key: "options.a.0", message: surrogate, source: "body", code: "invalid_value" }],
    });
    expect(parse(JSON.parse('{"options": {"\\udc00": 1}}'))).toEqual({
      ok: false,
      items: [{ key: "options.\udc00", message: surrogate, source: "body", code: "invalid_value" }],
    });
  });

  it("names every refused value in document order, beside the body's other bad keys", () => {
    const body = JSON.parse(
      '{"options": {"min": 1e400, "ok": [1, 2], "max": -1e400, "deep": {"list": [0, 1e999]},' +
        ' "choices": [{"name": "x\\ud800"}, {"name": "fine"}, {"name": "\\udfff"}]},' +
        ' "unknown": true}',
    );
    const finite = "must be a finite number";
    const surrogate = "must be valid Unicode (no unpaired surrogates)";
    expect(parse(body)).toEqual({
      ok: false,
      items: [
        { key: "options.min", message: finite, source: "body", code: "invalid_value" },
        { key: "options.max", message: finite, source: "body", code: "invalid_value" },
        { key: "options.deep.list.1", message: finite, source: "body", code: "invalid_value" },
        {
          key: "options.choices.0.name",
          message: surrogate,
          source: "body",
          code: "invalid_value",
        },
        {
          key: "options.choices.2.name",
          message: surrogate,
          source: "body",
          code: "invalid_value",
        },
        { key: "unknown", message: "is not allowed", source: "body", code: "unknown_key" },
      ],
    });
  });
});
