import type { JsonObject } from "@bufbuild/protobuf";
import { type JsonValue, SUBJECTS, valuesRemoved, valuesSet } from "@rowbase/kit";
import { type FieldTypeName, fieldTypeToProto } from "@rowbase/kit/field-types";
import {
  FieldCreatedSchema,
  FieldDeletedSchema,
} from "@rowbase/proto/rowbase/events/v1/catalog_events_pb";
import type { ChangeSet } from "./change-set.js";

/** A field's properties as audit events and the created and deleted events show them. */
export interface AnnouncedField {
  id: bigint;
  tableId: bigint;
  name: string;
  type: FieldTypeName;
  options: JsonObject;
  required: boolean;
  description: string;
  position: number;
}

/** Where a field's table lives. */
export interface DatabaseScope {
  organizationId: bigint;
  databaseId: bigint;
}

/** A field's properties as audit events show them. */
export function fieldValues(
  field: Omit<AnnouncedField, "id" | "tableId">,
): Record<string, JsonValue> {
  return {
    name: field.name,
    type: field.type,
    options: field.options,
    required: field.required,
    description: field.description,
    position: field.position,
  };
}

/**
 * `catalog.field.created` and its audit entry, with the options as stored: records makes a
 * link's junction from its `table_id` and `inverse_field_id`, so a link is announced only once
 * its inverse exists.
 */
export async function announceFieldCreated(
  changes: ChangeSet,
  scope: DatabaseScope,
  field: AnnouncedField,
): Promise<void> {
  const tableScope = { ...scope, tableId: field.tableId };
  await changes.publish(SUBJECTS.fieldCreated, FieldCreatedSchema, {
    ...tableScope,
    fieldId: field.id,
    name: field.name,
    type: fieldTypeToProto(field.type),
    options: field.options,
  });
  await changes.audit(
    tableScope,
    "field.created",
    { type: "field", id: field.id },
    valuesSet(fieldValues(field)),
  );
}

/**
 * `catalog.field.deleted` and its audit entry, with the options the field had: records drops a
 * link's junction by them.
 */
export async function announceFieldDeleted(
  changes: ChangeSet,
  scope: DatabaseScope,
  field: AnnouncedField,
): Promise<void> {
  const tableScope = { ...scope, tableId: field.tableId };
  await changes.publish(SUBJECTS.fieldDeleted, FieldDeletedSchema, {
    ...tableScope,
    fieldId: field.id,
    type: fieldTypeToProto(field.type),
    options: field.options,
  });
  await changes.audit(
    tableScope,
    "field.deleted",
    { type: "field", id: field.id },
    valuesRemoved(fieldValues(field)),
  );
}
