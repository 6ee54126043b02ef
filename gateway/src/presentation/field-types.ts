import {
  FIELD_TYPE_NAMES,
  type FieldTypeName,
  fieldTypeFromProto,
  fieldTypeToProto,
} from "@rowbase/kit/field-types";
import type { FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";

/**
 * The REST names of field types come from the shared registry, in the proto's
 * order, which is also the order /openapi.json lists them in. A `_UNSPECIFIED` or unknown value
 * in an answer breaks the contract: it throws (500, logged) rather than invent a name.
 */
export const FIELD_TYPES = FIELD_TYPE_NAMES;
export type { FieldTypeName };

export function fieldTypeName(type: FieldType): FieldTypeName {
  const name = fieldTypeFromProto(type);
  if (name === undefined) throw new Error(`the service answered field type ${type}`);
  return name;
}

export const fieldTypeValue = fieldTypeToProto;
