import type { JsonObject } from "@bufbuild/protobuf";
import { defineEntity, type InferEntity, p } from "@mikro-orm/postgresql";
import { FIELD_TYPE_NAMES, foldName } from "@rowbase/kit/field-types";

export const Database = defineEntity({
  name: "Database",
  tableName: "databases",
  properties: {
    id: p.bigint().primary().autoincrement().columnType("bigint"),
    organizationId: p.bigint().columnType("bigint"),
    name: p.text(),
    description: p.text().default(""),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p
      .datetime()
      .onCreate(() => new Date())
      .onUpdate(() => new Date()),
  },
});

export const Table = defineEntity({
  name: "Table",
  tableName: "tables",
  properties: {
    id: p.bigint().primary().autoincrement().columnType("bigint"),
    databaseId: p.bigint().columnType("bigint"),
    name: p.text(),
    /**
     * The name under foldName, unique within the database (migration NameKeys); set on create, and
     * by every rename with the name. Null only for a name the migration found equal to an older one.
     */
    nameKey: p
      .text()
      .nullable()
      .onCreate((row: { name: string }) => foldName(row.name)),
    description: p.text().default(""),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p
      .datetime()
      .onCreate(() => new Date())
      .onUpdate(() => new Date()),
  },
});

export const Field = defineEntity({
  name: "Field",
  tableName: "fields",
  properties: {
    id: p.bigint().primary().autoincrement().columnType("bigint"),
    tableId: p.bigint().columnType("bigint"),
    name: p.text(),
    /**
     * The name under foldName, unique within the table (migration NameKeys); set on create, and
     * by every rename with the name. Null only for a name the migration found equal to an older one.
     */
    nameKey: p
      .text()
      .nullable()
      .onCreate((row: { name: string }) => foldName(row.name)),
    type: p.enum(FIELD_TYPE_NAMES).columnType("text"),
    /** Normalised by the field-type registry: defaults filled in, choices with ids. */
    options: p.json<JsonObject>().columnType("jsonb"),
    required: p.boolean().default(false),
    description: p.text().default(""),
    /** 0-based, without gaps within the table. */
    position: p.integer(),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p
      .datetime()
      .onCreate(() => new Date())
      .onUpdate(() => new Date()),
  },
});

/** A public form of a table (migration Forms). */
export const Form = defineEntity({
  name: "Form",
  tableName: "forms",
  properties: {
    id: p.bigint().primary().autoincrement().columnType("bigint"),
    /** The public address: 128 random bits, base64url (22 characters). */
    formKey: p.text(),
    organizationId: p.bigint().columnType("bigint"),
    databaseId: p.bigint().columnType("bigint"),
    tableId: p.bigint().columnType("bigint"),
    name: p.text(),
    /** Field ids (JSON numbers) in the order the form shows them. */
    fields: p.json<number[]>().columnType("jsonb"),
    /** Field ids a submission must fill, each also in `fields`. */
    required: p.json<number[]>().columnType("jsonb"),
    successMessage: p.text().default(""),
    redirectUrl: p.text().default(""),
    active: p.boolean().default(true),
    submissions: p.bigint().columnType("bigint").default(0),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p
      .datetime()
      .onCreate(() => new Date())
      .onUpdate(() => new Date()),
  },
});

export const entities = [Database, Table, Field, Form];

export type DatabaseRow = InferEntity<typeof Database>;
export type TableRow = InferEntity<typeof Table>;
export type FieldRow = InferEntity<typeof Field>;
export type FormRow = InferEntity<typeof Form>;
