/**
 * The field types (docs/routes/catalog.md), in one place: names and proto mapping, option schemas,
 * value checks and type conversions. Catalog validates options with it, records validates and
 * converts values, files checks uploads against file options.
 */
import type { FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import type { z } from "zod";
import { OPTION_SCHEMAS } from "./options.js";
import { FIELD_TYPE_NAMES, type FieldTypeName, fieldTypeToProto, isReadOnlyType } from "./types.js";

export * from "./conversions.js";
export * from "./conversions-sql.js";
export * from "./descriptions.js";
export * from "./emails.js";
export * from "./forms.js";
export * from "./json-schema.js";
export * from "./names.js";
export * from "./options.js";
export * from "./types.js";
export * from "./values.js";

/** What the registry knows about one type. */
export interface FieldTypeDefinition {
  name: FieldTypeName;
  proto: FieldType;
  /** Values written by the system, never through records; such a field cannot be required. */
  readOnly: boolean;
  /** The strict zod schema of its options (before choice ids are assigned). */
  options: z.ZodType;
}

export const FIELD_TYPES: Readonly<Record<FieldTypeName, FieldTypeDefinition>> = Object.fromEntries(
  FIELD_TYPE_NAMES.map((name): [FieldTypeName, FieldTypeDefinition] => [
    name,
    {
      name,
      proto: fieldTypeToProto(name),
      readOnly: isReadOnlyType(name),
      options: OPTION_SCHEMAS[name],
    },
  ]),
) as Record<FieldTypeName, FieldTypeDefinition>;
