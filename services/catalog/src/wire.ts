import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { fieldTypeToProto } from "@rowbase/kit/field-types";
import {
  type Database,
  DatabaseSchema,
  type Field,
  FieldSchema,
  type Form,
  FormSchema,
  type Table,
  TableSchema,
} from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import type { DatabaseRow, FieldRow, FormRow, TableRow } from "./db/entities.js";

export function toDatabase(row: DatabaseRow): Database {
  return create(DatabaseSchema, {
    databaseId: row.id,
    organizationId: row.organizationId,
    name: row.name,
    description: row.description,
    createdAt: timestampFromDate(row.createdAt),
    updatedAt: timestampFromDate(row.updatedAt),
  });
}

export function toTable(row: TableRow): Table {
  return create(TableSchema, {
    tableId: row.id,
    databaseId: row.databaseId,
    name: row.name,
    description: row.description,
    createdAt: timestampFromDate(row.createdAt),
    updatedAt: timestampFromDate(row.updatedAt),
  });
}

export function toField(row: FieldRow): Field {
  return create(FieldSchema, {
    fieldId: row.id,
    tableId: row.tableId,
    name: row.name,
    type: fieldTypeToProto(row.type),
    options: row.options,
    required: row.required,
    description: row.description,
    position: row.position,
    createdAt: timestampFromDate(row.createdAt),
    updatedAt: timestampFromDate(row.updatedAt),
  });
}

export function toForm(row: FormRow): Form {
  return create(FormSchema, {
    formId: row.id,
    formKey: row.formKey,
    organizationId: row.organizationId,
    databaseId: row.databaseId,
    tableId: row.tableId,
    name: row.name,
    fields: row.fields.map(BigInt),
    required: row.required.map(BigInt),
    successMessage: row.successMessage,
    redirectUrl: row.redirectUrl,
    active: row.active,
    submissions: BigInt(row.submissions),
    createdAt: timestampFromDate(row.createdAt),
    updatedAt: timestampFromDate(row.updatedAt),
  });
}
