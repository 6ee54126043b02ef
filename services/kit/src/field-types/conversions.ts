import type { JsonValue } from "@bufbuild/protobuf";
import { choicesOf, type FieldLike, isSelectType, numberSettingsOf } from "./options.js";
import { FIELD_TYPE_NAMES, type FieldTypeName, isReadOnlyType, isRelationalType } from "./types.js";
import { datetimeString, parseDatetime, type ValueResult, validateValue } from "./values.js";

const TEXTUAL: readonly FieldTypeName[] = ["text", "long_text"];

/**
 * Every type with values of its own but file can be shown as text. Links, lookups and rollups
 * hold no value in the record's row (their values are other records'), so they change to
 * nothing and nothing changes to them.
 */
const TO_TEXT: readonly FieldTypeName[] = FIELD_TYPE_NAMES.filter(
  (t) => t !== "file" && !isRelationalType(t),
);

/** What text converts to: every type a record can write. */
const FROM_TEXT: readonly FieldTypeName[] = [
  "text",
  "long_text",
  "number",
  "boolean",
  "date",
  "datetime",
  "single_select",
  "multi_select",
  "email",
  "url",
  "phone",
  "json",
];

/**
 * The type changes that have a value conversion, besides keeping the type (text to and from
 * number/boolean/date/select/email/url/phone), and the obviously safe ones: anything
 * but a file to text, single <-> multi select, date <-> datetime, autonumber to number, the
 * record times to datetime or date. No change leads to a read-only type (the system writes
 * those values) nor away from file (its values live in the files service), and none into or
 * out of a link, lookup or rollup.
 */
const CONVERSIONS: ReadonlyMap<FieldTypeName, ReadonlySet<FieldTypeName>> = (() => {
  const table = new Map<FieldTypeName, Set<FieldTypeName>>(
    FIELD_TYPE_NAMES.map((t) => [t, new Set<FieldTypeName>([t])]),
  );
  const add = (from: FieldTypeName, ...to: FieldTypeName[]) => {
    for (const t of to) table.get(from)!.add(t);
  };
  for (const t of TO_TEXT) add(t, ...TEXTUAL);
  for (const t of TEXTUAL) add(t, ...FROM_TEXT);
  add("single_select", "multi_select");
  add("multi_select", "single_select");
  add("date", "datetime");
  add("datetime", "date");
  add("autonumber", "number");
  add("created_at", "datetime", "date");
  add("updated_at", "datetime", "date");
  return table;
})();

/** Whether a field of type `from` may become `to` (catalog refuses others: field_type_change_invalid). */
export function canChangeType(from: FieldTypeName, to: FieldTypeName): boolean {
  return CONVERSIONS.get(from)?.has(to) ?? false;
}

/** The types a field of type `from` may become, itself included. */
export function typeChangesFrom(from: FieldTypeName): FieldTypeName[] {
  return FIELD_TYPE_NAMES.filter((to) => canChangeType(from, to));
}

const fail = (message: string): ValueResult => ({ ok: false, message, code: "invalid_value" });

/** A stored value as text: numbers with the field's decimals, lists joined by ", ". */
export function valueAsText(field: FieldLike, value: JsonValue): string {
  if (typeof value === "string") return value;
  if (field.type === "number" && typeof value === "number" && Math.abs(value) < 1e21) {
    return value.toFixed(numberSettingsOf(field).decimals);
  }
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  if (field.type === "multi_select" && Array.isArray(value)) {
    return value.filter((v) => typeof v === "string").join(", ");
  }
  return JSON.stringify(value);
}

export const TRUE_WORDS: ReadonlySet<string> = new Set(["true", "yes", "y", "1", "on", "checked"]);
export const FALSE_WORDS: ReadonlySet<string> = new Set([
  "false",
  "no",
  "n",
  "0",
  "off",
  "unchecked",
]);

/**
 * The name in `to` of the choice `name` was in `from` (followed by its id), undefined when that
 * choice is gone from `to`; `name` itself when it was no choice of `from`. A removed choice is
 * never taken for another one that now has its name (renaming A to "B" while removing B must
 * not keep B's values as if they were A's).
 */
function sameChoice(from: FieldLike, to: FieldLike, name: string): string | undefined {
  const id = choicesOf(from.options).find((c) => c.name === name)?.id;
  if (id === undefined) return name;
  return choicesOf(to.options).find((c) => c.id === id)?.name;
}

/** Text as the value of a non-text type, before that type's own check. */
function fromText(to: FieldLike, text: string): unknown {
  const trimmed = text.trim();
  if (trimmed === "") return null;
  switch (to.type) {
    case "boolean": {
      const word = trimmed.toLowerCase();
      if (TRUE_WORDS.has(word)) return true;
      if (FALSE_WORDS.has(word)) return false;
      return text;
    }
    case "datetime":
      // A bare date becomes its midnight UTC.
      return /^\d{4}-\d{2}-\d{2}$/.test(trimmed) ? `${trimmed}T00:00:00Z` : trimmed;
    case "multi_select": {
      // The whole text when it names a choice (names may hold commas), else its comma-separated parts.
      const lower = trimmed.toLowerCase();
      if (choicesOf(to.options).some((c) => c.name.toLowerCase() === lower)) return [trimmed];
      return trimmed
        .split(",")
        .map((part) => part.trim())
        .filter((part) => part !== "");
    }
    case "json":
      return text;
    default:
      return trimmed;
  }
}

/**
 * Converts a stored value of field `from` into the value field `to` stores after a type or
 * options change, or says why it cannot. `null` stays `null`. Records use it both to check a
 * change (every value must convert) and to apply it.
 *
 * - To text/long_text: the value as text (`valueAsText`), then the text checks (length).
 * - From text/long_text: parsed as the new type: numeric strings, true/false/yes/no/1/0/on/off,
 *   dates, RFC 3339 date-times (a bare date is midnight UTC), choice names (comma-separated for
 *   multi_select), e-mails, URLs, phone numbers; json keeps the string. Blank text becomes null.
 * - Between selects: a value follows its choice by id, so renames made in the same update apply;
 *   single to multi wraps the name, multi to single takes a list of at most one name.
 * - date to datetime is midnight UTC; datetime (and created_at/updated_at) to date is the UTC day.
 * - Same type: the value is checked against the new options (numbers re-rounded, select values
 *   followed by id).
 */
export function convertValue(from: FieldLike, to: FieldLike, value: unknown): ValueResult {
  if (!canChangeType(from.type, to.type)) {
    return fail(`cannot convert ${from.type} to ${to.type}`);
  }
  if (value === null || value === undefined) return { ok: true, value: null };
  const stored = value as JsonValue;
  // The system's own values (autonumbers, record times, file metadata) stay as they are.
  if (from.type === to.type && isReadOnlyType(to.type)) return { ok: true, value: stored };

  if (isSelectType(from.type) && isSelectType(to.type)) {
    const names = Array.isArray(stored) ? stored : [stored];
    const mapped: JsonValue[] = [];
    for (const name of names) {
      const next = typeof name === "string" ? sameChoice(from, to, name) : name;
      if (next === undefined) return fail(`its choice "${name as string}" was removed`);
      mapped.push(next);
    }
    if (to.type === "multi_select") return validateValue(to, mapped);
    if (mapped.length > 1) return fail("holds more than one choice");
    return validateValue(to, mapped[0] ?? null);
  }
  if (to.type === "text" || to.type === "long_text") {
    if (from.type === "text" || from.type === "long_text") return validateValue(to, stored);
    return validateValue(to, valueAsText(from, stored));
  }
  if (from.type === "text" || from.type === "long_text") {
    if (typeof stored !== "string") return fail("must be a string");
    return validateValue(to, fromText(to, stored));
  }
  if (to.type === "date" && from.type !== "date") {
    if (typeof stored !== "string") return fail("must be a date-time string");
    const ms = parseDatetime(stored);
    const iso = ms === undefined ? undefined : datetimeString(ms);
    return iso ? { ok: true, value: iso.slice(0, 10) } : fail("must be a date-time");
  }
  if (to.type === "datetime" && from.type === "date") {
    if (typeof stored !== "string") return fail("must be a date string");
    return validateValue(to, `${stored}T00:00:00Z`);
  }
  return validateValue(to, stored);
}
