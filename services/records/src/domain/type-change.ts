import type { JsonValue } from "@bufbuild/protobuf";
import { convertValue, type FieldLike, validateValue } from "@rowbase/kit/field-types";

/** What a stored cell is made of: its value in `data` and the record's own times. */
export interface StoredCell {
  value: JsonValue | undefined;
  createdAt: Date;
  updatedAt: Date;
}

/**
 * A field's value as the registry converts it: created_at / updated_at fields show the record's
 * own columns (their values are not in `data`), every other type what `data` holds.
 */
export function sourceValue(field: FieldLike, cell: StoredCell): JsonValue {
  if (field.type === "created_at") return cell.createdAt.toISOString();
  if (field.type === "updated_at") return cell.updatedAt.toISOString();
  return cell.value ?? null;
}

/**
 * Whether a value can become the value of the changed field (CheckFieldTypeChange, before the
 * change): the registry's conversion, and its reason when it fails.
 */
export function conversionProblem(
  from: FieldLike,
  to: FieldLike,
  cell: StoredCell,
): string | undefined {
  const result = convertValue(from, to, sourceValue(from, cell));
  return result.ok ? undefined : result.message;
}

function sameJson(a: JsonValue, b: JsonValue): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * The value a cell holds after a field's type changed (FieldTypeChanged, after the change). A
 * value already of the new type as it would be stored stays: it was written after the change,
 * before this conversion ran, or this event is applied a second time. Anything else converts
 * with the registry, and a value that does not convert becomes null (SPEC section 6: catalog
 * asked first, so this only meets values written in between).
 */
export function convertedValue(from: FieldLike, to: FieldLike, cell: StoredCell): JsonValue {
  const source = sourceValue(from, cell);
  if (source === null) return null;
  const asIs = validateValue(to, source);
  if (asIs.ok && sameJson(asIs.value, source)) return source;
  const converted = convertValue(from, to, source);
  return converted.ok ? converted.value : null;
}
