import {
  VALIDATION_CODES,
  type ValidationCode,
  type ValidationItem,
  type ValidationSource,
} from "@rowbase/kit";
import type { z } from "zod";

export type { ValidationCode, ValidationItem, ValidationSource };

/** The 400 body of a request that does not fit its route: one item per problem. */
export interface ValidationEnvelope {
  status_code: 400;
  detail: string;
  extra: ValidationItem[];
}

/**
 * A request the gateway refuses before any service sees it. It carries only the items; the
 * error middleware adds the method and path, so every 400 of this shape is written in one place.
 */
export class ValidationFailed extends Error {
  constructor(readonly items: ValidationItem[]) {
    super(`validation failed: ${items.map((item) => `${item.source}.${item.key}`).join(", ")}`);
    this.name = "ValidationFailed";
  }

  static of(
    source: ValidationSource,
    key: string,
    message: string,
    code: ValidationCode,
  ): ValidationFailed {
    return new ValidationFailed([{ key, message, source, code }]);
  }
}

/**
 * The most items `extra` lists. A body of 1 MiB can hold some 100,000 unknown keys, each one a
 * problem: listing every one made the answer grow with the request. The first ones, in the
 * order they were found, are enough to fix a request and send it again.
 */
export const VALIDATION_ITEMS_MAX = 100;

/**
 * The envelope of the items, of every 400 of this shape, the gateway's and the services' alike.
 * Past VALIDATION_ITEMS_MAX the detail says how many problems there were in all.
 */
export function validationEnvelope(
  method: string,
  path: string,
  items: ValidationItem[],
): ValidationEnvelope {
  const detail = `Validation failed for ${method} ${path}`;
  if (items.length <= VALIDATION_ITEMS_MAX) return { status_code: 400, detail, extra: items };
  return {
    status_code: 400,
    detail: `${detail}: the first ${VALIDATION_ITEMS_MAX} of ${items.length} problems are listed`,
    extra: items.slice(0, VALIDATION_ITEMS_MAX),
  };
}

const TYPE_NAMES: Record<string, string> = {
  string: "a string",
  number: "a number",
  int: "an integer",
  boolean: "a boolean",
  object: "an object",
  array: "an array",
};

/**
 * Turns zod issues into envelope items: one item per unknown key, "is required" for a missing
 * value, and the schema's own message otherwise. Issues must come from a parse with
 * `reportInput: true`, which is how a missing value is told from a wrong one.
 */
export function itemsFromIssues(
  issues: readonly z.core.$ZodIssue[],
  source: ValidationSource,
): ValidationItem[] {
  // By key and message: two checks of one value that fail with one message (a cheap length
  // check ahead of the exact one, say) are one item.
  const items = new Map<string, ValidationItem>();
  const add = (key: string, message: string, code: ValidationCode) =>
    items.set(JSON.stringify([key, message]), { key, message, source, code });
  for (const issue of issues) {
    const path = issue.path.map(String);
    if (issue.code === "unrecognized_keys") {
      for (const key of issue.keys) add([...path, key].join("."), "is not allowed", "unknown_key");
      continue;
    }
    add(
      path.length > 0 ? path.join(".") : source,
      messageOf(issue, path.length === 0, source),
      codeOf(issue),
    );
  }
  return [...items.values()];
}

/**
 * The code of a zod issue: a missing value is `required`, a wrong JSON type `invalid_type`, a
 * text or list past its length `too_short`/`too_long`, a number or date past its bounds
 * `out_of_range`. A refinement names its own code in its params (`params: { code }`); any other
 * refusal of a value of the right type is `invalid_value`.
 */
function codeOf(issue: z.core.$ZodIssue): ValidationCode {
  switch (issue.code) {
    case "invalid_type":
      return issue.input === undefined ? "required" : "invalid_type";
    case "too_small":
    case "too_big": {
      const counted =
        issue.origin === "string" || issue.origin === "array" || issue.origin === "set";
      if (!counted) return "out_of_range";
      return issue.code === "too_small" ? "too_short" : "too_long";
    }
    case "custom": {
      const code = (issue.params as { code?: unknown } | undefined)?.code;
      return isValidationCode(code) ? code : "invalid_value";
    }
    default:
      return "invalid_value";
  }
}

export function isValidationCode(value: unknown): value is ValidationCode {
  return (VALIDATION_CODES as readonly unknown[]).includes(value);
}

function messageOf(issue: z.core.$ZodIssue, atRoot: boolean, source: ValidationSource): string {
  if (issue.code !== "invalid_type") return issue.message;
  const missing = issue.input === undefined;
  if (atRoot && source === "body") {
    return missing ? "a JSON object body is required" : "must be a JSON object";
  }
  if (missing) return "is required";
  return `must be ${TYPE_NAMES[issue.expected] ?? issue.expected}`;
}
