import type { JsonValue } from "@bufbuild/protobuf";
import { sameJson } from "@rowbase/kit";
import {
  convertValue,
  type FieldLike,
  isEmptyValue,
  validateValue,
} from "@rowbase/kit/field-types";

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
 * What a change asks of the field's values beyond converting: nothing, none empty (the field is
 * `made` required) or none emptied by the conversion (it is `kept` required: a value that is
 * already empty, from before required was checked, does not hold up a change it is no part of).
 */
export type RequiredRule = "none" | "made" | "kept";

/**
 * Whether a value can become the value of the changed field (CheckFieldTypeChange, before the
 * change): the registry's conversion, and its reason when it fails; then the `required` rule's
 * (blank text becomes no number).
 */
export function conversionProblem(
  from: FieldLike,
  to: FieldLike,
  cell: StoredCell,
  required: RequiredRule = "none",
): string | undefined {
  const source = sourceValue(from, cell);
  const result = convertValue(from, to, source);
  if (!result.ok) return result.message;
  if (required === "none" || !isEmptyValue(result.value)) return undefined;
  if (!isEmptyValue(source)) return emptiedProblem(to);
  return required === "made" ? EMPTY_MADE_REQUIRED : undefined;
}

/** Why a required field's value cannot be emptied by a change (also said in SQL, type-change.ts). */
export const emptiedProblem = (to: FieldLike) =>
  `would be empty as ${to.type}, and the field is required`;
export const EMPTY_MADE_REQUIRED = "is empty, and the field is to be required";

/**
 * The value a cell holds after a field's type changed (FieldTypeChanged, after the change). A
 * value already of the new type as it would be stored stays: it was written after the change,
 * before this conversion ran, or this event is applied a second time. Anything else converts
 * with the registry, and a value that does not convert becomes null (catalog asked first
 * whether every value converts, so this only meets values written in between).
 */
export function convertedValue(from: FieldLike, to: FieldLike, cell: StoredCell): JsonValue {
  const source = sourceValue(from, cell);
  if (source === null) return null;
  const asIs = validateValue(to, source);
  if (asIs.ok && sameJson(asIs.value, source)) return source;
  const converted = convertValue(from, to, source);
  return converted.ok ? converted.value : null;
}

/** A type change of a field that its conversion has not reached yet (`pending_type_change`). */
export interface PendingChange {
  fieldId: string;
  to: FieldLike;
}

/** Whether `field` is already of the type and options a change makes it (a newer schema). */
export function heldAsChanged(field: FieldLike, to: FieldLike): boolean {
  // Options read back from jsonb come in its key order.
  return field.type === to.type && sameJson(field.options ?? {}, to.options ?? {});
}

/**
 * Why a value written to `field` (checked against it, as it will be stored) would not survive a
 * pending change of the field's type: undefined when it converts, or when `field` is already of
 * the new type and options (the schema is newer than the change, and the conversion keeps
 * values of the new type).
 */
export function pendingProblem(
  field: FieldLike,
  pending: PendingChange,
  value: JsonValue,
): string | undefined {
  if (value === null || heldAsChanged(field, pending.to)) return undefined;
  const now = new Date();
  const problem = conversionProblem(field, pending.to, {
    value,
    createdAt: now,
    updatedAt: now,
  });
  if (!problem) return undefined;
  return field.type === pending.to.type
    ? `does not fit the options the field is changing to: ${problem}`
    : `does not fit the ${pending.to.type} type the field is changing to: ${problem}`;
}
