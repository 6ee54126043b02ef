import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { ValidationCode, ValidationItem } from "@rowbase/kit";
import { isEmptyValue, validateValue } from "@rowbase/kit/field-types";
import { resolveReference } from "../query/index.js";
import type { SchemaField } from "../table-schema.js";
import { queryFieldsOf } from "./query-fields.js";

/** Values checked against the table, keyed by field id, ready to store. */
export type CheckedValues = Map<string, JsonValue>;

export type InputCheck =
  | { ok: true; values: CheckedValues }
  | { ok: false; items: ValidationItem[] };

/**
 * Checks the `data` of a create or an update against the table's fields, with
 * the value rules of the field-type registry. Every key is a field reference (all digits: an id,
 * else a name, exactly or regardless of case); an unknown field, a second key naming a field
 * already named, a read-only field and a value the registry refuses each give one item keyed by
 * the reference as sent, behind `prefix` (`records.3.data.` in a batch).
 *
 * A required field must hold a non-empty value after a create and cannot be emptied by an update;
 * a required field missing from a create is reported under its name.
 */
export function checkInput(
  fields: readonly SchemaField[],
  data: Readonly<JsonObject> | undefined,
  mode: "create" | "update",
  prefix = "",
): InputCheck {
  const queryFields = queryFieldsOf(fields);
  const items: ValidationItem[] = [];
  const values: CheckedValues = new Map();
  const namedBy = new Map<string, string>();
  const item = (key: string, message: string, code: ValidationCode) =>
    items.push({ key: `${prefix}${key}`, message, source: "body", code });

  // Keys, not entries: a batch checks 1,000 records, and each entry would be an array.
  const given = data ?? {};
  for (const reference of Object.keys(given)) {
    const raw = given[reference];
    const target = resolveReference(reference, queryFields, { systemColumns: false });
    if (target?.kind !== "field") {
      item(reference, "is not a field of this table", "not_found");
      continue;
    }
    const field = fields.find((f) => f.id === target.field.id)!;
    const earlier = namedBy.get(field.id);
    if (earlier !== undefined) {
      item(reference, `names the same field as '${earlier}'`, "invalid_value");
      continue;
    }
    namedBy.set(field.id, reference);
    const checked = validateValue(field, raw);
    if (!checked.ok) {
      item(reference, checked.message, checked.code);
      continue;
    }
    if (field.required && isEmptyValue(checked.value)) {
      item(
        reference,
        mode === "create" ? "is required" : "is required and cannot be cleared",
        "required",
      );
      continue;
    }
    values.set(field.id, checked.value);
  }
  if (mode === "create") {
    for (const field of fields) {
      if (field.required && !namedBy.has(field.id)) item(field.name, "is required", "required");
    }
  }
  return items.length > 0 ? { ok: false, items } : { ok: true, values };
}

/**
 * A record's stored data after writing checked values into it: an empty value (null) removes
 * the key, so that a cleared cell and one never written are stored alike.
 */
export function applyValues(before: Readonly<JsonObject>, values: CheckedValues): JsonObject {
  const after: JsonObject = { ...before };
  // forEach, not for-of: no [id, value] array per value.
  values.forEach((value, id) => {
    if (value === null) delete after[id];
    else after[id] = value;
  });
  return after;
}
