import type { MessageInitShape } from "@bufbuild/protobuf";
import type { Field, FieldDefinitionSchema } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import type { z } from "zod";
import { fieldTypeName, fieldTypeValue } from "../../presentation/field-types.js";
import { idOf, required, timeOf } from "../../presentation/wire-values.js";
import type { FieldCreateSchema, FieldSchema } from "./field-schemas.js";

/**
 * A field as the REST API writes it. `options` arrives as the JsonObject protobuf-es makes of
 * a google.protobuf.Struct; unset, it is `{}`, so clients always find an object.
 */
export function presentField(field: Field | undefined): z.output<typeof FieldSchema> {
  const f = required(field, "field");
  return {
    field_id: idOf(f.fieldId),
    table_id: idOf(f.tableId),
    name: f.name,
    type: fieldTypeName(f.type),
    options: f.options ?? {},
    required: f.required,
    description: f.description,
    position: f.position,
    created_at: timeOf(f.createdAt),
    updated_at: timeOf(f.updatedAt),
  };
}

/**
 * A FieldCreate body as the FieldDefinition that /field/create and /table/create send. Options
 * left out stay unset, which the contract reads as the type's defaults.
 */
export function fieldDefinitionOf(
  body: z.output<typeof FieldCreateSchema>,
): MessageInitShape<typeof FieldDefinitionSchema> {
  return {
    name: body.name,
    type: fieldTypeValue(body.type),
    options: body.options,
    required: body.required ?? false,
    description: body.description ?? "",
  };
}
