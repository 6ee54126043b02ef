import type { JsonObject } from "@bufbuild/protobuf";
import { z } from "zod";

/**
 * How deep objects and arrays may nest in a free-form JSON object the gateway forwards (record
 * values as JSON text, field options as a google.protobuf.Struct). Far beyond any real use
 * (field options nest 3 levels), and low enough that what walks them recursively downstream
 * (encoding a Struct, the records service's value checks) cannot run out of stack.
 */
export const MAX_JSON_DEPTH = 32;

const UNPAIRED_SURROGATE = "must be valid Unicode (no unpaired surrogates)";

interface Problem {
  path: (string | number)[];
  message: string;
}

/**
 * The first value, in document order, that a Struct cannot carry as sent: a number JSON.parse
 * made infinite (`1e400`), nesting past MAX_JSON_DEPTH, a `__proto__` key (zod and protobuf-es
 * would drop it silently), a string or key with an unpaired surrogate (protobuf would write
 * U+FFFD instead), or anything that is not JSON at all. Walked with an explicit stack,
 * so a hostile depth is reported rather than overflowing.
 */
function firstProblem(root: object): Problem | undefined {
  const stack: { value: unknown; path: (string | number)[]; depth: number }[] = [
    { value: root, path: [], depth: 1 },
  ];
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    const { value, path, depth } = item;
    if (value === null || typeof value === "boolean") continue;
    if (typeof value === "string") {
      // protobuf writes an unpaired surrogate as U+FFFD: the service would store another text.
      if (!value.isWellFormed()) return { path, message: UNPAIRED_SURROGATE };
      continue;
    }
    if (typeof value === "number") {
      if (!Number.isFinite(value)) return { path, message: "must be a finite number" };
      continue;
    }
    let entries: [string | number, unknown][];
    if (Array.isArray(value)) {
      entries = value.map((element: unknown, index) => [index, element]);
    } else if (isPlainObject(value)) {
      if (Object.hasOwn(value, "__proto__")) {
        return { path: [...path, "__proto__"], message: "is not allowed" };
      }
      entries = Object.entries(value);
      const key = entries.find(([k]) => !(k as string).isWellFormed());
      if (key) return { path: [...path, key[0]], message: UNPAIRED_SURROGATE };
    } else {
      return { path, message: "must be a JSON value" };
    }
    if (depth > MAX_JSON_DEPTH) {
      return { path, message: `must not nest more than ${MAX_JSON_DEPTH} levels deep` };
    }
    // Pushed in reverse so that the first entry is looked at first.
    for (let i = entries.length - 1; i >= 0; i--) {
      const [key, element] = entries[i] as [string | number, unknown];
      stack.push({ value: element, path: [...path, key], depth: depth + 1 });
    }
  }
  return undefined;
}

function isPlainObject(value: unknown): value is object {
  if (typeof value !== "object" || value === null) return false;
  const prototype = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

/**
 * A free-form JSON object (e.g. field options) whose content another layer judges: only that it
 * is an object a google.protobuf.Struct carries faithfully is checked here. The output is the
 * JsonObject protobuf-es takes for a Struct field.
 */
export const jsonObject = z.preprocess(
  (value, ctx) => {
    if (!isPlainObject(value)) {
      const message = value === undefined ? "is required" : "must be a JSON object";
      ctx.addIssue({ code: "custom", message, input: value });
      return value;
    }
    const problem = firstProblem(value);
    if (problem) ctx.addIssue({ code: "custom", ...problem, input: value });
    return value;
  },
  // Inside the preprocess step, as in `queryId`, so the document still reads `type: object`.
  z.looseObject({}).transform((value) => value as JsonObject),
);
