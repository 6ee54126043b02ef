import type { JsonObject } from "@bufbuild/protobuf";
import {
  type FieldTypeName,
  foldName,
  isRelationalType,
  linkOptionsOf,
  NAME_MAX_LENGTH,
  type OptionError,
  type RollupFunction,
} from "@rowbase/kit/field-types";
import { fieldNameProblem, invalidFieldOptions } from "./validation.js";

/**
 * The rules of link, lookup and rollup options that need no database: what a lookup or rollup
 * may show, what each rollup function takes, and the name of a link's inverse.
 */

export const INVERSE_SET_BY_SERVER = "is set by the server";
export const LINK_TABLE_MESSAGE = "must be a table of the same database";
export const LINK_TABLE_FIXED = "cannot be changed; create a new link field instead";
export const INVERSE_KEPT = "is set by the server: leave it out or send the stored value";
export const LINK_FIELD_MESSAGE = "must be a link field of the same table";
export const SHOWN_FIELD_MESSAGE = "must be a field of the linked table";
export const SHOWN_FIELD_TYPE_MESSAGE =
  "cannot be a link, lookup, rollup or file field (lookups and rollups go one link deep)";

/** Types `sum` and `avg` read: numbers. */
const NUMERIC: ReadonlySet<FieldTypeName> = new Set(["number", "autonumber"]);
/** Types `min` and `max` read: numbers and times. */
const ORDERED: ReadonlySet<FieldTypeName> = new Set([
  "number",
  "autonumber",
  "date",
  "datetime",
  "created_at",
  "updated_at",
]);

/**
 * What is wrong with showing a field of `type` through a lookup or rollup: a link, lookup or
 * rollup would make a computation go more than one link deep, and a file's value lives in the
 * files service.
 */
export function shownFieldProblem(type: FieldTypeName): string | undefined {
  return isRelationalType(type) || type === "file" ? SHOWN_FIELD_TYPE_MESSAGE : undefined;
}

/**
 * What is wrong with a rollup function over a field of `type`: `count` and `count_values` take
 * any, `sum` and `avg` numbers, `min` and `max` numbers and times.
 */
export function rollupFunctionProblem(fn: RollupFunction, type: FieldTypeName): string | undefined {
  if (fn === "sum" || fn === "avg") {
    return NUMERIC.has(type) ? undefined : `${fn} needs a number or autonumber field, not ${type}`;
  }
  if (fn === "min" || fn === "max") {
    return ORDERED.has(type)
      ? undefined
      : `${fn} needs a number, autonumber, date, datetime, created_at or updated_at field, not ${type}`;
  }
  return undefined;
}

/** `text` cut to at most `length` code points. */
function cut(text: string, length: number): string {
  return Array.from(text).slice(0, length).join("").trimEnd();
}

/**
 * The name of a link's inverse: the linking table's name, else with ` (2)`, ` (3)`, ... (the
 * name cut to leave room) until no field of the target table has it regardless of case
 * (`used` holds their foldName keys). A table has fewer than MAX_FIELDS_PER_TABLE + 2 fields,
 * so one of that many candidates is free.
 */
export function inverseFieldName(tableName: string, used: ReadonlySet<string>): string {
  for (let n = 1; ; n += 1) {
    const suffix = n === 1 ? "" : ` (${n})`;
    const name = `${cut(tableName, NAME_MAX_LENGTH - Array.from(suffix).length)}${suffix}`;
    if (!fieldNameProblem(name) && !used.has(foldName(name))) return name;
  }
}

/**
 * What must not change in a link's options: its table (the junction joins these two tables)
 * and its inverse (the server's). `next` are the parsed new options; answers them with the
 * stored inverse. A client may leave `inverse_field_id` out or send the stored one (so that
 * options read from the field can be sent back as they are), nothing else.
 */
export function keepLinkIdentity(stored: JsonObject, next: JsonObject): JsonObject {
  const before = linkOptionsOf(stored);
  const after = linkOptionsOf(next);
  const errors: OptionError[] = [];
  if (before && after && after.tableId !== before.tableId) {
    errors.push({ key: "options.table_id", message: LINK_TABLE_FIXED });
  }
  if (next.inverse_field_id !== undefined && after?.inverseFieldId !== before?.inverseFieldId) {
    errors.push({ key: "options.inverse_field_id", message: INVERSE_KEPT });
  }
  if (errors.length > 0) throw invalidFieldOptions(errors);
  const { inverse_field_id: _, ...rest } = next;
  return stored.inverse_field_id === undefined
    ? rest
    : { ...rest, inverse_field_id: stored.inverse_field_id };
}
