import { FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";

/**
 * The most fields a table may have (Airtable's limit per table is 500 too): every record call
 * carries the table's schema, and records keeps a thousand schemas in memory.
 */
export const MAX_FIELDS_PER_TABLE = 500;

/** The wire names of the field types, as REST clients and the database know them. */
export const FIELD_TYPE_NAMES = [
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
  "file",
  "autonumber",
  "created_at",
  "updated_at",
  "link",
  "lookup",
  "rollup",
] as const;

export type FieldTypeName = (typeof FIELD_TYPE_NAMES)[number];

const TO_PROTO: Record<FieldTypeName, FieldType> = {
  text: FieldType.TEXT,
  long_text: FieldType.LONG_TEXT,
  number: FieldType.NUMBER,
  boolean: FieldType.BOOLEAN,
  date: FieldType.DATE,
  datetime: FieldType.DATETIME,
  single_select: FieldType.SINGLE_SELECT,
  multi_select: FieldType.MULTI_SELECT,
  email: FieldType.EMAIL,
  url: FieldType.URL,
  phone: FieldType.PHONE,
  json: FieldType.JSON,
  file: FieldType.FILE,
  autonumber: FieldType.AUTONUMBER,
  created_at: FieldType.CREATED_AT,
  updated_at: FieldType.UPDATED_AT,
  link: FieldType.LINK,
  lookup: FieldType.LOOKUP,
  rollup: FieldType.ROLLUP,
};

const FROM_PROTO = new Map<FieldType, FieldTypeName>(
  FIELD_TYPE_NAMES.map((name) => [TO_PROTO[name], name]),
);

/**
 * Types whose values the system writes: a file field's value comes from the files service,
 * lookups and rollups are computed from linked records, the others come from the record's own
 * bookkeeping. They can never be `required` nor written through records.
 */
const READ_ONLY: ReadonlySet<FieldTypeName> = new Set([
  "file",
  "autonumber",
  "created_at",
  "updated_at",
  "lookup",
  "rollup",
]);

/**
 * Types that relate a record to records of another table (or its own): a link's values live in
 * its junction table, lookups and rollups are computed through a link when records are read.
 * None of them has a column in the record's own table.
 */
const RELATIONAL: ReadonlySet<FieldTypeName> = new Set(["link", "lookup", "rollup"]);

export function isFieldTypeName(value: unknown): value is FieldTypeName {
  return typeof value === "string" && (FIELD_TYPE_NAMES as readonly string[]).includes(value);
}

export function fieldTypeToProto(name: FieldTypeName): FieldType {
  return TO_PROTO[name];
}

/** The type named by a message; undefined for FIELD_TYPE_UNSPECIFIED or an unknown number. */
export function fieldTypeFromProto(type: FieldType): FieldTypeName | undefined {
  return FROM_PROTO.get(type);
}

export function isReadOnlyType(name: FieldTypeName): boolean {
  return READ_ONLY.has(name);
}

/** Whether a field of this type is a link, a lookup or a rollup (no column of its own). */
export function isRelationalType(name: FieldTypeName): name is "link" | "lookup" | "rollup" {
  return RELATIONAL.has(name);
}
