import type { JsonObject } from "@bufbuild/protobuf";
import { isPlainObject } from "@rowbase/kit";
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

/** What a value without problems has; shared, so walking good values allocates nothing. */
const NONE: readonly Problem[] = [];

/**
 * Every value, in document order, that a Struct cannot carry as sent: a number JSON.parse made
 * infinite (`1e400`), nesting past MAX_JSON_DEPTH, a `__proto__` key (zod and protobuf-es would
 * drop it silently), a string or key with an unpaired surrogate (protobuf would write U+FFFD
 * instead), or anything that is not JSON at all. All of them, as the validation envelope lists
 * every bad key, not only the first. The recursion stops at MAX_JSON_DEPTH, so a hostile depth
 * is reported rather than overflowing the stack; paths are built only for problems, as the
 * recursion unwinds (a batch of 1000 records walks every value).
 */
function problemsOf(value: unknown, depth: number): readonly Problem[] {
  if (value === null || typeof value === "boolean") return NONE;
  if (typeof value === "string") {
    // protobuf writes an unpaired surrogate as U+FFFD: the service would store another text.
    return value.isWellFormed() ? NONE : [{ path: [], message: UNPAIRED_SURROGATE }];
  }
  if (typeof value === "number") {
    return Number.isFinite(value) ? NONE : [{ path: [], message: "must be a finite number" }];
  }
  if (!Array.isArray(value) && !isPlainObject(value)) {
    return [{ path: [], message: "must be a JSON value" }];
  }
  if (depth > MAX_JSON_DEPTH) {
    return [{ path: [], message: `must not nest more than ${MAX_JSON_DEPTH} levels deep` }];
  }
  let problems: Problem[] | undefined;
  const container = value as Record<string | number, unknown>;
  const keys = Array.isArray(value) ? undefined : Object.keys(value);
  const count = keys ? keys.length : (value as unknown[]).length;
  for (let i = 0; i < count; i++) {
    const key = keys ? (keys[i] as string) : i;
    // A refused key's value is not looked into: it would not be sent on under that key.
    const found: readonly Problem[] =
      key === "__proto__"
        ? [{ path: [], message: "is not allowed" }]
        : typeof key === "string" && !key.isWellFormed()
          ? [{ path: [], message: UNPAIRED_SURROGATE }]
          : problemsOf(container[key], depth + 1);
    if (found.length === 0) continue;
    problems ??= [];
    for (const problem of found) {
      problem.path.unshift(key);
      problems.push(problem);
    }
  }
  return problems ?? NONE;
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
    for (const problem of problemsOf(value, 1)) {
      ctx.addIssue({ code: "custom", ...problem, input: value });
    }
    return value;
  },
  // Inside the preprocess step, as in `queryId`, so the document still reads `type: object`.
  checkedObject(),
);

/**
 * A value a preprocess step found to be a JSON object, passed on as it is, which the document
 * shows as any object. `z.looseObject({})` would copy it key by key, with a parse result per
 * value: for a batch of 1,000 records, twice per record (`jsonObject` inside records' `data`).
 */
export function checkedObject() {
  return z.custom<JsonObject>().meta({ type: "object", properties: {}, additionalProperties: {} });
}
