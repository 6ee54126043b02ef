import fc from "fast-check";
import { RawJson, withKey } from "./json-text.js";

/** A JSON Schema (draft 2020-12) as the gateway's /openapi.json writes it. */
// biome-ignore lint/suspicious/noExplicitAny: schemas are read loosely, keyword by keyword
export type JsonSchema = Record<string, any>;

export interface SchemaContext {
  /** `#/components/schemas` of the document, for `$ref`. */
  components: Record<string, JsonSchema>;
  /**
   * Values that mean something to the running system for a property or parameter of this name
   * (real ids, field names, filter expressions), or undefined for the schema's own values.
   */
  hint(name: string, schema: JsonSchema): fc.Arbitrary<unknown> | undefined;
}

const CONTROL = /\p{Cc}/u;

export function resolve(schema: JsonSchema, context: SchemaContext): JsonSchema {
  let current = schema;
  for (let hops = 0; typeof current.$ref === "string" && hops < 10; hops++) {
    const id = (current.$ref as string).split("/").pop()!;
    const target = context.components[id];
    if (!target) throw new Error(`unknown schema ${current.$ref}`);
    current = target;
  }
  return current;
}

function stringOf(schema: JsonSchema): fc.Arbitrary<string> {
  const minLength = schema.minLength ?? 0;
  const maxLength = Math.max(minLength, Math.min(schema.maxLength ?? 40, 40));
  switch (schema.format) {
    case "email":
      return fc.emailAddress().filter((email) => email.length <= (schema.maxLength ?? 254));
    case "date-time":
      return fc
        .date({ min: new Date("1990-01-01"), max: new Date("2040-01-01"), noInvalidDate: true })
        .map((date) => date.toISOString());
    case "date":
      return fc
        .date({ min: new Date("2020-01-01"), max: new Date("2030-01-01"), noInvalidDate: true })
        .map((date) => date.toISOString().slice(0, 10));
    case "uri":
      return fc.webUrl();
  }
  const pattern = schema.pattern as string | undefined;
  if (pattern && !pattern.includes("\\p") && !pattern.includes("\\P")) {
    return fc
      .stringMatching(new RegExp(pattern))
      .filter((text) => text.length >= minLength && text.length <= (schema.maxLength ?? 1e9));
  }
  const text = fc.string({ unit: "grapheme", minLength, maxLength });
  return pattern?.includes("Cc") ? text.filter((s) => !CONTROL.test(s)) : text;
}

/** Any JSON value, small. */
export const anyJson: fc.Arbitrary<unknown> = fc.jsonValue({ maxDepth: 3 });

/** A value of the schema's shape (within its bounds, mostly), with hints for known names. */
export function validValue(
  input: JsonSchema,
  context: SchemaContext,
  name = "",
  depth = 0,
): fc.Arbitrary<unknown> {
  const schema = resolve(input, context);
  const hinted = context.hint(name, schema);
  if (hinted) return hinted;
  if (schema.const !== undefined) return fc.constant(schema.const);
  if (Array.isArray(schema.enum)) return fc.constantFrom(...schema.enum);
  const options = (schema.oneOf ?? schema.anyOf) as JsonSchema[] | undefined;
  if (options) return fc.oneof(...options.map((o) => validValue(o, context, name, depth + 1)));
  switch (schema.type) {
    case "string":
      return stringOf(schema);
    case "integer":
      return fc.integer({
        min: Math.max(schema.minimum ?? -1000, -1e9),
        max: Math.min(schema.maximum ?? 1000, 1e9),
      });
    case "number":
      return fc.double({ noNaN: true, noDefaultInfinity: true });
    case "boolean":
      return fc.boolean();
    case "array": {
      const minLength = schema.minItems ?? 0;
      const maxLength = Math.max(minLength, Math.min(schema.maxItems ?? 5, minLength + 4));
      return fc.array(validValue(schema.items ?? {}, context, `${name}[]`, depth + 1), {
        minLength,
        maxLength,
      });
    }
    case "object": {
      const properties = (schema.properties ?? {}) as Record<string, JsonSchema>;
      if (Object.keys(properties).length === 0) {
        return depth > 4 ? fc.constant({}) : fc.dictionary(fc.string(), anyJson, { maxKeys: 4 });
      }
      const model = Object.fromEntries(
        Object.entries(properties).map(([key, property]) => [
          key,
          validValue(property, context, key, depth + 1),
        ]),
      );
      return fc.record(model, { requiredKeys: (schema.required ?? []) as string[] });
    }
    default:
      return anyJson;
  }
}

const HUGE = "x".repeat(200_000);

/** Values no schema wants: odd numbers, odd strings, odd structures. */
export const weirdValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom<unknown>(
    new RawJson("1e309"),
    new RawJson("-1e309"),
    new RawJson("-0"),
    new RawJson("1e-400"),
    new RawJson("9223372036854775808"),
    new RawJson("-9223372036854775809"),
    new RawJson("18446744073709551616"),
    new RawJson("123456789012345678901234567890"),
    new RawJson("0.0000000000000000000000001"),
    new RawJson(`${"9".repeat(400)}`),
    2 ** 53,
    2 ** 53 + 2,
    2 ** 63,
    -(2 ** 31) - 1,
    2 ** 31,
    -1,
    0,
    1.5,
    Number.MAX_VALUE,
    Number.MIN_VALUE,
    "NaN",
    "Infinity",
    "-0",
    "1e309",
    "0x10",
    "",
    " ",
    "\u0000",
    "a\u0000b",
    "\u0007\u001b[31m",
    "\r\n",
    "\u202e\u200b\ufeff",
    "\ud800",
    "😀".repeat(60),
    "é".normalize("NFD"),
    "'; DROP TABLE x; --",
    "%00%ZZ",
    "../../etc/passwd",
    "__proto__",
    "constructor",
    null,
    true,
    false,
    [],
    {},
    [null],
    [[[]]],
    { __proto__: null },
    JSON.parse('{"__proto__": {"polluted": true}}'),
    JSON.parse('{"constructor": {"prototype": {"polluted": true}}}'),
    { toString: "x", valueOf: 1, hasOwnProperty: null },
    HUGE,
    new RawJson(`${"[".repeat(5000)}${"]".repeat(5000)}`),
    new RawJson(`${'{"a":'.repeat(3000)}1${"}".repeat(3000)}`),
  ),
  fc.string({ unit: "binary", maxLength: 30 }),
  fc.string({ unit: "grapheme", minLength: 101, maxLength: 300 }),
  fc.integer(),
  fc.double(),
  fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map((n) => new RawJson(String(n))),
  anyJson,
);

const EXTRA_KEYS = fc.constantFrom(
  "__proto__",
  "constructor",
  "prototype",
  "toString",
  "hasOwnProperty",
  "extra",
  "",
  "\u0000",
  "data",
  "id",
  "row_id",
  "😀",
);

export type Mutation =
  | { kind: "replace"; at: number; value: unknown }
  | { kind: "drop"; at: number }
  | { kind: "add"; at: number; key: string; value: unknown }
  | { kind: "wrap"; at: number }
  | { kind: "nest"; at: number; depth: number };

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({ kind: fc.constant("replace"), at: fc.nat(), value: weirdValue }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("drop"), at: fc.nat() }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("add"),
      at: fc.nat(),
      key: EXTRA_KEYS,
      value: weirdValue,
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("wrap"), at: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("nest"),
      at: fc.nat(),
      depth: fc.constantFrom(5, 50, 400),
    }),
  },
) as fc.Arbitrary<Mutation>;

interface Slot {
  get(): unknown;
  set(value: unknown): void;
  drop(): void;
}

/** Every place in the tree a mutation can hit, the root first. */
function slots(root: { value: unknown }): Slot[] {
  const out: Slot[] = [];
  const visit = (get: () => unknown, set: (v: unknown) => void, drop: () => void) => {
    out.push({ get, set, drop });
    const value = get();
    if (value instanceof RawJson || value === null || typeof value !== "object") return;
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) {
        visit(
          () => value[i],
          (v) => {
            value[i] = v;
          },
          () => value.splice(i, 1),
        );
      }
      return;
    }
    const object = value as Record<string, unknown>;
    for (const key of Object.keys(object)) {
      visit(
        () => object[key],
        (v) => {
          Object.defineProperty(object, key, {
            value: v,
            enumerable: true,
            writable: true,
            configurable: true,
          });
        },
        () => delete object[key],
      );
    }
  };
  visit(
    () => root.value,
    (v) => {
      root.value = v;
    },
    () => {
      root.value = undefined;
    },
  );
  return out;
}

function copy(value: unknown): unknown {
  if (value instanceof RawJson || value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map(copy);
  let out: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    out = withKey(out, key, copy((value as Record<string, unknown>)[key]));
  }
  return out;
}

/**
 * Levels that `nest` mutations may add to one value in all: far past the gateway's depth limit,
 * and short of what this file's own recursive helpers (and `toJsonText`) can walk. Three nests
 * of 400 stacked in one value overflowed the test's stack, not the gateway's.
 */
const NEST_BUDGET = 400;

/**
 * The value with the mutations applied, in order. Everything put in is a copy: `weirdValue`'s
 * constants (`[]`, `{}`, ...) are shared by every run, and an `add` into one of them in place
 * changed it for the runs after (once, into a cycle that overflowed every later run's stack).
 */
export function applyMutations(value: unknown, mutations: Mutation[]): unknown {
  const root = { value: copy(value) };
  let nestBudget = NEST_BUDGET;
  for (const m of mutations) {
    const all = slots(root);
    const slot = all[m.at % all.length]!;
    switch (m.kind) {
      case "replace":
        slot.set(copy(m.value));
        break;
      case "drop":
        slot.drop();
        break;
      case "add": {
        const target = slot.get();
        const added = copy(m.value);
        if (target !== null && typeof target === "object" && !(target instanceof RawJson)) {
          if (Array.isArray(target)) target.push(added);
          else slot.set(withKey(target as Record<string, unknown>, m.key, added));
        } else slot.set(withKey({}, m.key, added));
        break;
      }
      case "wrap":
        slot.set([slot.get()]);
        break;
      case "nest": {
        const levels = Math.min(m.depth, nestBudget);
        nestBudget -= levels;
        let nested = slot.get();
        for (let i = 0; i < levels; i++) nested = { a: nested };
        slot.set(nested);
        break;
      }
    }
  }
  return root.value;
}

/** A value of the arbitrary with one to three mutations applied anywhere in it. */
export function mutatedValue(valid: fc.Arbitrary<unknown>): fc.Arbitrary<unknown> {
  return fc
    .tuple(valid, fc.array(mutation, { minLength: 1, maxLength: 3 }))
    .map(([value, mutations]) => applyMutations(value, mutations));
}
