import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { mebibytes, RECORD_MAX_BYTES } from "@rowbase/kit";
import { type FieldTypeName, isReadOnlyType, jsonSchemaOf } from "@rowbase/kit/field-types";
import { isSortable } from "../query/index.js";
import type { SchemaField, TableSchema } from "../table-schema.js";

/**
 * What a table's records hold: its fields and the JSON Schemas of a record's data, read and
 * written, by field id and by field name. Only the data object: how it travels is the
 * gateway's to describe.
 */
export interface RecordSchema {
  tableName: string;
  fields: { fieldId: bigint; name: string; type: FieldTypeName; sortable: boolean }[];
  readById: JsonObject;
  readByName: JsonObject;
  createByName: JsonObject;
  createById: JsonObject;
  updateByName: JsonObject;
  updateById: JsonObject;
}

export function recordSchemaOf(schema: TableSchema): RecordSchema {
  const { fields } = schema;
  return {
    tableName: schema.name,
    fields: fields.map((field) => ({
      fieldId: BigInt(field.id),
      name: field.name,
      type: field.type,
      sortable: isSortable(field.type),
    })),
    readById: dataSchema(
      fields,
      (f) => f.id,
      "With response_format=ids: every field by id (those of `fields` when given), null when empty.",
    ),
    readByName: dataSchema(
      fields,
      (f) => f.name,
      "With response_format=names: every field by name (those of `fields` when given), null when empty.",
    ),
    createByName: inputSchema(fields, true, "name"),
    createById: inputSchema(fields, true, "id"),
    updateByName: inputSchema(fields, false, "name"),
    updateById: inputSchema(fields, false, "id"),
  };
}

/** Sets a key that may be any field name, "__proto__" included. */
function put(target: JsonObject, key: string, value: JsonValue): void {
  Object.defineProperty(target, key, {
    value,
    enumerable: true,
    writable: true,
    configurable: true,
  });
}

/** A value schema with the field's own words before what its type says about the value. */
function described(schema: JsonObject, own: string): JsonObject {
  const type = typeof schema.description === "string" ? schema.description : "";
  if (!own) return schema;
  if (!type) return { ...schema, description: own };
  return { ...schema, description: `${/[.!?:]$/.test(own) ? own : `${own}.`} ${type}` };
}

/** The value schemas of the table's fields, keyed as `keyOf` says. */
function dataSchema(
  fields: readonly SchemaField[],
  keyOf: (field: SchemaField) => string,
  description: string,
): JsonObject {
  const properties: JsonObject = {};
  for (const field of fields) {
    put(properties, keyOf(field), {
      title: field.name,
      ...described(jsonSchemaOf(field, "output"), field.description),
    });
  }
  // No `required`: a read that names `fields` holds only the fields asked for.
  return { type: "object", description, properties, additionalProperties: false };
}

/**
 * A required field's value schema: no null, and none of the values `isEmptyValue` counts as
 * empty, which a create must not send and an update must not clear to.
 */
function filled(schema: JsonObject): JsonObject {
  const { type, enum: values, anyOf, ...rest } = schema;
  return {
    ...rest,
    ...(Array.isArray(type) ? { type: type.filter((t) => t !== "null") } : type ? { type } : {}),
    ...(Array.isArray(values) ? { enum: values.filter((v) => v !== null) } : {}),
    ...(Array.isArray(anyOf)
      ? { anyOf: anyOf.filter((s) => (s as JsonObject | null)?.type !== "null") }
      : {}),
    not: { enum: [null, "", []] },
  };
}

/** A reference of digits only is always read as an id: a field so named cannot be named. */
const nameIsUsable = (field: SchemaField) => !/^[0-9]+$/.test(field.name);

/**
 * The values a create (or update) may send, keyed by name or by id. A write also takes the two
 * mixed, and names in any case, which no schema of fixed keys says.
 */
function inputSchema(
  fields: readonly SchemaField[],
  create: boolean,
  by: "name" | "id",
): JsonObject {
  const writable = fields.filter(
    (f) => !isReadOnlyType(f.type) && (by === "id" || nameIsUsable(f)),
  );
  const keyOf = (field: SchemaField) => (by === "id" ? field.id : field.name);
  const properties: JsonObject = {};
  for (const field of writable) {
    const value = jsonSchemaOf(field, "input");
    put(properties, keyOf(field), {
      ...(by === "id" ? { title: field.name } : {}),
      ...described(
        field.required ? filled(value) : value,
        `Field ${field.id}${field.required ? " (required)" : ""}${field.description ? `: ${field.description}` : ""}`,
      ),
    });
  }
  // A required field named with digits only cannot be named: no data keyed by names has it.
  const required = create
    ? fields.filter((f) => !isReadOnlyType(f.type) && f.required).map(keyOf)
    : [];
  const digitNames = fields.filter((f) => !nameIsUsable(f)).map((f) => f.name);
  return {
    type: "object",
    description: `${
      by === "id"
        ? "Values keyed by field id (all digits)."
        : `Values keyed by field name (any case)${digitNames.length > 0 ? `; a name of digits only reads as an id, so ${digitNames.join(", ")} are written by id` : ""}.`
    } ${create ? "Required fields must be present and non-empty." : "Only the named fields change; required fields cannot be cleared."} Read-only fields (${
      fields
        .filter((f) => isReadOnlyType(f.type))
        .map((f) => f.name)
        .join(", ") || "none"
    }) cannot be written. A record's values come to at most ${mebibytes(RECORD_MAX_BYTES)} as stored JSON.`,
    properties,
    ...(required.length > 0 ? { required } : {}),
    additionalProperties: false,
  };
}
