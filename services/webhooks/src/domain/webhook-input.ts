import {
  CHANGE_TYPES,
  type ChangeTypeName,
  textProblemCode,
  type ValidationItem,
} from "@rowbase/kit";
import { descriptionProblem } from "@rowbase/kit/field-types";

/** The change types a webhook may be sent, in the order a webhook lists them. */
export const EVENT_TYPES = CHANGE_TYPES;
export type EventType = ChangeTypeName;

export const WHERE_MAX_LENGTH = 4000;

/**
 * A webhook's events as stored: the given types once each in the documented order, or every
 * type when none is given; a problem for a name that is not a change type.
 */
export function eventsOf(names: readonly string[]): EventType[] | ValidationItem {
  const unknown = names.find((name) => !(EVENT_TYPES as readonly string[]).includes(name));
  if (unknown !== undefined) {
    return {
      key: "events",
      message: "must be record.created, record.updated or record.deleted",
      source: "body",
      code: "invalid_value",
    };
  }
  return names.length === 0 ? [...EVENT_TYPES] : EVENT_TYPES.filter((type) => names.includes(type));
}

/** A description as stored (trimmed), or its problem (the rule of every description). */
export function descriptionOf(raw: string): string | ValidationItem {
  const value = raw.trim();
  const problem = descriptionProblem(value);
  return problem
    ? {
        key: "description",
        message: problem,
        source: "body",
        code: textProblemCode(value, problem),
      }
    : value;
}

/** A `where` as stored: null for none (absent or blank), else the text; or its problem. */
export function whereOf(raw: string | undefined): string | null | ValidationItem {
  if (raw === undefined || raw.trim() === "") return null;
  if (raw.length > WHERE_MAX_LENGTH) {
    return {
      key: "where",
      message: `must be at most ${WHERE_MAX_LENGTH} characters`,
      source: "body",
      code: "too_long",
    };
  }
  return raw;
}

export function isProblem(value: unknown): value is ValidationItem {
  return typeof value === "object" && value !== null && !Array.isArray(value) && "key" in value;
}
