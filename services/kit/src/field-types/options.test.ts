import type { JsonObject } from "@bufbuild/protobuf";
import type { FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import { describe, expect, it } from "vitest";
import {
  choiceRenames,
  choicesOf,
  computedOptionsOf,
  FIELD_TYPE_NAMES,
  FIELD_TYPES,
  type FieldTypeName,
  fieldAcceptsFile,
  fieldLikeOf,
  fieldTypeFromProto,
  fieldTypeToProto,
  isFieldTypeName,
  isReadOnlyType,
  isRelationalType,
  linkOptionsOf,
  newChoiceId,
  numberSettingsOf,
  type OptionError,
  optionsAfterTypeChange,
  parseFieldOptions,
  textLimitOf,
} from "./index.js";

function errorsOf(
  type: FieldTypeName,
  input: unknown,
  previous?: Parameters<typeof parseFieldOptions>[2],
) {
  const result = parseFieldOptions(type, input, previous);
  if (result.ok) throw new Error(`expected errors, got ${JSON.stringify(result.options)}`);
  return result.errors;
}

function optionsOf(
  type: FieldTypeName,
  input: unknown,
  context?: Parameters<typeof parseFieldOptions>[2],
) {
  const result = parseFieldOptions(type, input, context);
  if (!result.ok) throw new Error(`expected options, got ${JSON.stringify(result.errors)}`);
  return result.options;
}

const keys = (errors: OptionError[]) => errors.map((e) => e.key);

let counter = 0;
const sequentialIds = () => `ch_${++counter}`;

describe("types", () => {
  it("names nineteen types, each with its own proto value and back", () => {
    expect(FIELD_TYPE_NAMES).toHaveLength(19);
    const protos = new Set(FIELD_TYPE_NAMES.map(fieldTypeToProto));
    expect(protos.size).toBe(19);
    for (const name of FIELD_TYPE_NAMES) {
      expect(fieldTypeFromProto(fieldTypeToProto(name))).toBe(name);
      expect(FIELD_TYPES[name]).toMatchObject({ name, proto: fieldTypeToProto(name) });
    }
    expect(fieldTypeFromProto(0)).toBeUndefined();
    expect(fieldTypeFromProto(99 as FieldType)).toBeUndefined();
  });

  it("marks file, autonumber, the record times, lookups and rollups read-only, and only those", () => {
    expect(FIELD_TYPE_NAMES.filter(isReadOnlyType)).toEqual([
      "file",
      "autonumber",
      "created_at",
      "updated_at",
      "lookup",
      "rollup",
    ]);
    expect(FIELD_TYPE_NAMES.filter((t) => FIELD_TYPES[t].readOnly)).toHaveLength(6);
  });

  it("reads field messages", () => {
    expect(fieldLikeOf({ type: fieldTypeToProto("number"), options: { decimals: 2 } })).toEqual({
      type: "number",
      options: { decimals: 2 },
    });
    expect(fieldLikeOf({ type: fieldTypeToProto("json") })).toEqual({ type: "json", options: {} });
    expect(fieldLikeOf({ type: 0 as FieldType })).toBeUndefined();
  });

  it("recognises type names and nothing else", () => {
    expect(isFieldTypeName("single_select")).toBe(true);
    for (const other of ["Text", "string", "", "__proto__", "toString", 1, null, undefined]) {
      expect(isFieldTypeName(other)).toBe(false);
    }
  });
});

describe("parseFieldOptions: shape", () => {
  it("gives every type its defaults when there are no options", () => {
    const defaults = Object.fromEntries(
      FIELD_TYPE_NAMES.filter((t) => !isRelationalType(t)).map((t) => [t, optionsOf(t, undefined)]),
    );
    expect(defaults).toEqual({
      text: {},
      long_text: {},
      number: { decimals: 0 },
      boolean: {},
      date: {},
      datetime: {},
      single_select: { choices: [] },
      multi_select: { choices: [] },
      email: {},
      url: {},
      phone: {},
      json: {},
      file: {},
      autonumber: {},
      created_at: {},
      updated_at: {},
    });
    expect(optionsOf("number", null)).toEqual({ decimals: 0 });
    expect(optionsOf("number", {})).toEqual({ decimals: 0 });
  });

  it("needs a link's table and a lookup's or rollup's link and field", () => {
    expect(parseFieldOptions("link", undefined)).toEqual({
      ok: false,
      errors: [{ key: "options.table_id", message: "must be a positive integer id" }],
    });
    expect(optionsOf("link", { table_id: 7 })).toEqual({ table_id: 7, multiple: true });
    expect(parseFieldOptions("lookup", { link_field_id: 0, field_id: 2.5 })).toEqual({
      ok: false,
      errors: [
        { key: "options.link_field_id", message: "must be a positive integer id" },
        { key: "options.field_id", message: "must be a positive integer id" },
      ],
    });
    expect(
      parseFieldOptions("rollup", { link_field_id: 1, field_id: 2, function: "median" }),
    ).toMatchObject({ ok: false, errors: [{ key: "options.function" }] });
    expect(linkOptionsOf({ table_id: 7, multiple: false, inverse_field_id: 9 })).toEqual({
      tableId: 7n,
      multiple: false,
      inverseFieldId: 9n,
    });
    expect(computedOptionsOf({ link_field_id: 1, field_id: 2, function: "sum" })).toEqual({
      linkFieldId: 1n,
      fieldId: 2n,
      function: "sum",
    });
  });

  it("refuses options that are not an object", () => {
    for (const input of [[], "x", 3, true, [{ decimals: 1 }], new Date(), new Map()]) {
      expect(errorsOf("number", input)).toEqual([{ key: "options", message: "must be an object" }]);
    }
  });

  it("refuses unknown keys one by one, on types with and without options", () => {
    expect(errorsOf("number", { decimals: 2, precision: 2, format: "x" })).toEqual([
      { key: "options.precision", message: "is not allowed" },
      { key: "options.format", message: "is not allowed" },
    ]);
    for (const type of [
      "long_text",
      "boolean",
      "date",
      "datetime",
      "email",
      "url",
      "phone",
      "json",
      "autonumber",
      "created_at",
      "updated_at",
    ] as const) {
      expect(errorsOf(type, { anything: 1 })).toEqual([
        { key: "options.anything", message: "is not allowed" },
      ]);
    }
    // A key of another type does not fit.
    expect(keys(errorsOf("text", { decimals: 2 }))).toEqual(["options.decimals"]);
    expect(keys(errorsOf("single_select", { max_length: 2 }))).toEqual(["options.max_length"]);
  });

  it("refuses __proto__, constructor and prototype keys instead of merging them", () => {
    const polluted = JSON.parse('{"__proto__": {"decimals": 5, "polluted": true}}');
    expect(errorsOf("number", polluted)).toEqual([
      { key: "options.__proto__", message: "is not allowed" },
    ]);
    expect(keys(errorsOf("text", { constructor: { prototype: 1 }, prototype: 1 }))).toEqual([
      "options.constructor",
      "options.prototype",
    ]);
    const choice = JSON.parse('{"choices": [{"name": "A", "__proto__": {"id": "x"}}]}');
    expect(errorsOf("single_select", choice)).toEqual([
      { key: "options.choices.0.__proto__", message: "is not allowed" },
    ]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it("accepts an object without prototype", () => {
    const bare = Object.assign(Object.create(null), { max_length: 5 });
    expect(optionsOf("text", bare)).toEqual({ max_length: 5 });
  });
});

describe("text options", () => {
  it("takes max_length 1-10000", () => {
    expect(optionsOf("text", { max_length: 1 })).toEqual({ max_length: 1 });
    expect(optionsOf("text", { max_length: 10_000 })).toEqual({ max_length: 10_000 });
  });

  it.each([0, -1, 10_001, 2.5, Number.NaN, Number.POSITIVE_INFINITY, "10", null, true, []])(
    "refuses max_length %s",
    (value) => {
      expect(errorsOf("text", { max_length: value })).toEqual([
        { key: "options.max_length", message: "must be an integer from 1 to 10000" },
      ]);
    },
  );

  it("limits values to max_length, else 10,000; long_text to 100,000", () => {
    expect(textLimitOf({ type: "text", options: { max_length: 20 } })).toBe(20);
    expect(textLimitOf({ type: "text" })).toBe(10_000);
    expect(textLimitOf({ type: "text", options: { max_length: 1e9 } })).toBe(10_000);
    expect(textLimitOf({ type: "long_text" })).toBe(100_000);
  });
});

describe("number options", () => {
  it("takes decimals 0-10 (default 0) and finite min <= max", () => {
    expect(optionsOf("number", { decimals: 10 })).toEqual({ decimals: 10 });
    expect(optionsOf("number", { decimals: 0, min: -1.5, max: 1e300 })).toEqual({
      decimals: 0,
      min: -1.5,
      max: 1e300,
    });
    expect(optionsOf("number", { min: 3, max: 3 })).toEqual({ decimals: 0, min: 3, max: 3 });
    expect(optionsOf("number", { min: 5 })).toEqual({ decimals: 0, min: 5 });
  });

  it.each([-1, 11, 1.5, Number.NaN, "2", null, Number.POSITIVE_INFINITY])(
    "refuses decimals %s",
    (decimals) => {
      expect(errorsOf("number", { decimals })).toEqual([
        { key: "options.decimals", message: "must be an integer from 0 to 10" },
      ]);
    },
  );

  it.each([
    Number.NaN,
    Number.POSITIVE_INFINITY,
    Number.NEGATIVE_INFINITY,
    JSON.parse("1e309"),
    "1",
    null,
    {},
  ])("refuses min and max %s", (bound) => {
    expect(keys(errorsOf("number", { min: bound, max: bound }))).toEqual([
      "options.min",
      "options.max",
    ]);
  });

  it("refuses min greater than max, on min", () => {
    expect(errorsOf("number", { min: 2, max: 1 })).toEqual([
      { key: "options.min", message: "must not be greater than max" },
    ]);
  });

  it("refuses a range holding no number of the field's decimals, and takes one that does", () => {
    for (const options of [
      { decimals: 0, min: 0.5, max: 0.6 },
      { decimals: 1, min: 0.11, max: 0.19 },
      { decimals: 0, min: -0.6, max: -0.5 },
    ]) {
      expect(errorsOf("number", options), JSON.stringify(options)).toEqual([
        { key: "options.min", message: "leaves no number of the field's decimals up to max" },
      ]);
    }
    for (const options of [
      { decimals: 0, min: 0.5, max: 1 },
      { decimals: 1, min: 0.1, max: 0.1 },
      { decimals: 2, min: 0.11, max: 0.19 },
      { decimals: 0, min: -3, max: 7 },
    ]) {
      expect(optionsOf("number", options), JSON.stringify(options)).toEqual(options);
    }
  });

  it("lists every problem at once", () => {
    expect(keys(errorsOf("number", { decimals: 99, min: "x", extra: 1 }))).toEqual([
      "options.decimals",
      "options.min",
      "options.extra",
    ]);
  });

  it("reads stored settings defensively", () => {
    expect(numberSettingsOf({ type: "number", options: { decimals: 2, min: 0 } })).toEqual({
      decimals: 2,
      min: 0,
    });
    expect(numberSettingsOf({ type: "number" })).toEqual({ decimals: 0 });
    expect(numberSettingsOf({ type: "number", options: { decimals: "9" } })).toEqual({
      decimals: 0,
    });
  });
});

describe("select options", () => {
  it("gives new choices fresh ids and trims their names", () => {
    const options = optionsOf(
      "single_select",
      {
        choices: [
          { name: " Red ", color: "#ff0000" },
          { name: "Green", color: "green-light" },
        ],
      },
      { newChoiceId: sequentialIds },
    );
    expect(options).toEqual({
      choices: [
        { id: `ch_${counter - 1}`, name: "Red", color: "#ff0000" },
        { id: `ch_${counter}`, name: "Green", color: "green-light" },
      ],
    });
  });

  it("makes random ids by default", () => {
    const a = newChoiceId();
    expect(a).toMatch(/^ch_[A-Za-z0-9_-]{12}$/);
    expect(newChoiceId()).not.toBe(a);
    const options = optionsOf("multi_select", { choices: [{ name: "A" }, { name: "B" }] });
    const [first, second] = choicesOf(options);
    expect(first!.id).not.toBe(second!.id);
  });

  it("refuses names that repeat regardless of case, naming the first", () => {
    expect(
      errorsOf("single_select", {
        choices: [{ name: "Red" }, { name: "Blue" }, { name: "RED" }, { name: " blue " }],
      }),
    ).toEqual([
      {
        key: "options.choices.2.name",
        message: "duplicates choice 0 (names are unique regardless of case)",
      },
      {
        key: "options.choices.3.name",
        message: "duplicates choice 1 (names are unique regardless of case)",
      },
    ]);
    expect(keys(errorsOf("multi_select", { choices: [{ name: "Ä" }, { name: "ä" }] }))).toEqual([
      "options.choices.1.name",
    ]);
  });

  it.each([
    ["", "must be 1-100 characters"],
    ["   ", "must be 1-100 characters"],
    ["x".repeat(101), "must be 1-100 characters"],
    ["a\u0000b", "must not contain control characters"],
    ["line\nbreak", "must not contain control characters"],
    ["\u200b\u200d", "must contain a visible character"],
    ["\ud800", "must be valid Unicode"],
    // Names' one rule, which choices once followed only in part.
    ["paid\u202e", "must not contain control characters"],
    ["\u2066Red\u2069", "must not contain control characters"],
  ])("refuses the choice name %j", (name, message) => {
    expect(errorsOf("single_select", { choices: [{ name }] })).toEqual([
      { key: "options.choices.0.name", message },
    ]);
  });

  it("takes a name of exactly 100 characters, counted as code points", () => {
    expect(
      choicesOf(optionsOf("single_select", { choices: [{ name: "é".repeat(100) }] })),
    ).toHaveLength(1);
    expect(
      choicesOf(optionsOf("single_select", { choices: [{ name: "🗂".repeat(100) }] })),
    ).toHaveLength(1);
  });

  it("refuses bad choice shapes and colours", () => {
    expect(keys(errorsOf("single_select", { choices: "Red,Green" }))).toEqual(["options.choices"]);
    expect(keys(errorsOf("single_select", { choices: ["Red"] }))).toEqual(["options.choices.0"]);
    expect(keys(errorsOf("single_select", { choices: [{}] }))).toEqual(["options.choices.0.name"]);
    expect(keys(errorsOf("single_select", { choices: [{ name: 5 }] }))).toEqual([
      "options.choices.0.name",
    ]);
    expect(keys(errorsOf("single_select", { choices: [{ name: "A", label: "x" }] }))).toEqual([
      "options.choices.0.label",
    ]);
    for (const colour of ["", "#12", "#gggggg", "red;", "x".repeat(33), 5, "1red"]) {
      expect(keys(errorsOf("single_select", { choices: [{ name: "A", color: colour }] }))).toEqual([
        "options.choices.0.color",
      ]);
    }
    expect(keys(errorsOf("single_select", { choices: [{ name: "A", id: 5 }] }))).toEqual([
      "options.choices.0.id",
    ]);
  });

  it("refuses more than 1000 choices", () => {
    const choices = Array.from({ length: 1001 }, (_, i) => ({ name: `c${i}` }));
    expect(errorsOf("multi_select", { choices })).toEqual([
      { key: "options.choices", message: "must have at most 1000 choices" },
    ]);
    expect(choicesOf(optionsOf("multi_select", { choices: choices.slice(1) }))).toHaveLength(1000);
  });

  it("keeps the ids of the current choices and refuses ids it never gave", () => {
    const previous = {
      type: "single_select" as const,
      options: {
        choices: [
          { id: "ch_a", name: "Red" },
          { id: "ch_b", name: "Blue" },
        ],
      },
    };
    expect(
      optionsOf(
        "single_select",
        { choices: [{ id: "ch_b", name: "Navy" }, { name: "Green" }] },
        { previous, newChoiceId: () => "ch_new" },
      ),
    ).toEqual({
      choices: [
        { id: "ch_b", name: "Navy" },
        { id: "ch_new", name: "Green" },
      ],
    });
    expect(
      errorsOf("single_select", { choices: [{ id: "ch_zzz", name: "Red" }] }, { previous }),
    ).toEqual([
      {
        key: "options.choices.0.id",
        message: "is not a choice of this field (leave the id out for a new choice)",
      },
    ]);
    expect(
      errorsOf(
        "single_select",
        {
          choices: [
            { id: "ch_a", name: "Red" },
            { id: "ch_a", name: "Rouge" },
          ],
        },
        { previous },
      ),
    ).toEqual([{ key: "options.choices.1.id", message: "appears more than once" }]);
    // Without a select before it, no id is known.
    expect(keys(errorsOf("single_select", { choices: [{ id: "ch_a", name: "Red" }] }))).toEqual([
      "options.choices.0.id",
    ]);
    expect(
      keys(
        errorsOf(
          "single_select",
          { choices: [{ id: "ch_a", name: "Red" }] },
          { previous: { type: "text", options: { choices: previous.options.choices } } },
        ),
      ),
    ).toEqual(["options.choices.0.id"]);
    // A multi select may keep the ids of the single select it was.
    expect(
      choicesOf(
        optionsOf("multi_select", { choices: [{ id: "ch_a", name: "Red" }] }, { previous }),
      ),
    ).toEqual([{ id: "ch_a", name: "Red" }]);
  });

  it("keeps the id of a current choice resent by name without an id", () => {
    const previous = {
      type: "single_select" as const,
      options: {
        choices: [
          { id: "ch_a", name: "Open" },
          { id: "ch_b", name: "Closed" },
        ],
      },
    };
    expect(
      optionsOf(
        "single_select",
        { choices: [{ name: "closed" }, { name: "Open", color: "#0f0" }, { name: "New" }] },
        { previous, newChoiceId: () => "ch_new" },
      ),
    ).toEqual({
      choices: [
        { id: "ch_b", name: "closed" },
        { id: "ch_a", name: "Open", color: "#0f0" },
        { id: "ch_new", name: "New" },
      ],
    });
    // An id claimed by another entry is not taken by name: that entry renames it.
    expect(
      optionsOf(
        "single_select",
        { choices: [{ id: "ch_a", name: "Done" }, { name: "Open" }] },
        { previous, newChoiceId: () => "ch_fresh" },
      ),
    ).toEqual({
      choices: [
        { id: "ch_a", name: "Done" },
        { id: "ch_fresh", name: "Open" },
      ],
    });
  });

  it("detects renames by id, swaps included, and nothing else", () => {
    const before = {
      choices: [
        { id: "a", name: "Red" },
        { id: "b", name: "Blue" },
        { id: "c", name: "Green" },
        { id: "d", name: "Gone" },
      ],
    };
    const after: JsonObject = {
      choices: [
        { id: "a", name: "Blue" },
        { id: "b", name: "Red" },
        { id: "c", name: "Green", color: "#00ff00" },
        { id: "e", name: "Gone" },
      ],
    };
    expect(choiceRenames(before, after)).toEqual([
      { choiceId: "a", oldName: "Red", newName: "Blue" },
      { choiceId: "b", oldName: "Blue", newName: "Red" },
    ]);
    expect(choiceRenames(before, before)).toEqual([]);
    expect(choiceRenames(undefined, after)).toEqual([]);
    expect(choiceRenames(before, {})).toEqual([]);
  });

  it("reads choices defensively", () => {
    expect(choicesOf(undefined)).toEqual([]);
    expect(choicesOf({ choices: "x" })).toEqual([]);
    expect(
      choicesOf({ choices: [{ id: "a", name: "A" }, { name: "no id" }, "x", null, { id: 1 }] }),
    ).toEqual([{ id: "a", name: "A" }]);
  });
});

describe("file options", () => {
  it("takes max_size in bytes and MIME types, normalised", () => {
    expect(
      optionsOf("file", {
        max_size: 1_048_576,
        allowed_types: ["image/*", "application/PDF", "application/pdf", "text/plain"],
      }),
    ).toEqual({ max_size: 1_048_576, allowed_types: ["image/*", "application/pdf", "text/plain"] });
    expect(optionsOf("file", { allowed_types: ["application/vnd.ms-excel"] })).toEqual({
      allowed_types: ["application/vnd.ms-excel"],
    });
  });

  it.each([0, -5, 1.5, Number.NaN, "10", 2 ** 53, null])("refuses max_size %s", (maxSize) => {
    expect(errorsOf("file", { max_size: maxSize })).toEqual([
      { key: "options.max_size", message: "must be a positive integer number of bytes" },
    ]);
  });

  it("refuses bad type lists", () => {
    expect(keys(errorsOf("file", { allowed_types: [] }))).toEqual(["options.allowed_types"]);
    expect(keys(errorsOf("file", { allowed_types: "image/png" }))).toEqual([
      "options.allowed_types",
    ]);
    for (const bad of ["image", "*/*", "image/", "/png", "image/png; q=1", "ima ge/png", 5, ""]) {
      expect(keys(errorsOf("file", { allowed_types: ["text/plain", bad] }))).toEqual([
        "options.allowed_types.1",
      ]);
    }
    const many = Array.from({ length: 101 }, (_, i) => `application/x-${i}`);
    expect(keys(errorsOf("file", { allowed_types: many }))).toEqual(["options.allowed_types"]);
  });

  it("says whether a file fits the field", () => {
    const field = {
      type: "file" as const,
      options: { max_size: 100, allowed_types: ["image/*", "application/pdf"] },
    };
    expect(fieldAcceptsFile(field, { mimeType: "image/png", size: 100 })).toEqual({ ok: true });
    expect(fieldAcceptsFile(field, { mimeType: "Application/PDF; charset=x", size: 1 })).toEqual({
      ok: true,
    });
    expect(fieldAcceptsFile(field, { mimeType: "image/png", size: 101 })).toEqual({
      ok: false,
      reason: "file_too_large",
    });
    expect(fieldAcceptsFile(field, { mimeType: "text/plain", size: 1 })).toEqual({
      ok: false,
      reason: "file_type_not_allowed",
    });
    expect(fieldAcceptsFile(field, { mimeType: "imagex/png", size: 1 })).toMatchObject({
      ok: false,
    });
    expect(fieldAcceptsFile({ type: "file" }, { mimeType: "x/y", size: 1e12 })).toEqual({
      ok: true,
    });
  });
});

describe("optionsAfterTypeChange", () => {
  it("keeps choices between selects and starts from defaults otherwise", () => {
    const select = {
      type: "single_select" as const,
      options: { choices: [{ id: "a", name: "Red", color: "#f00" }] },
    };
    expect(optionsAfterTypeChange(select, "multi_select")).toEqual(select.options);
    expect(optionsAfterTypeChange(select, "text")).toEqual({});
    expect(optionsAfterTypeChange({ type: "text", options: { max_length: 5 } }, "number")).toEqual({
      decimals: 0,
    });
    expect(optionsAfterTypeChange({ type: "text" }, "single_select")).toEqual({ choices: [] });
  });
});
