import type { RecordChange } from "@rowbase/proto/rowbase/records/v1/records_pb";
import { ChangeType } from "@rowbase/proto/rowbase/records/v1/records_pb";
import { idOf, timeOf } from "../../presentation/wire-values.js";
import { recordJson } from "../record/record-presenters.js";
import type { ChangeTypeName } from "./change-schemas.js";

const TYPE_NAMES = new Map<ChangeType, ChangeTypeName>([
  [ChangeType.CREATED, "record.created"],
  [ChangeType.UPDATED, "record.updated"],
  [ChangeType.DELETED, "record.deleted"],
]);

const TYPE_VALUES = new Map<ChangeTypeName, ChangeType>(
  [...TYPE_NAMES].map(([value, name]) => [name, value]),
);

export function changeTypeValue(name: ChangeTypeName): ChangeType {
  return TYPE_VALUES.get(name)!;
}

/** A change's `type` as the API names it. */
export function changeTypeName(change: RecordChange): ChangeTypeName {
  const name = TYPE_NAMES.get(change.type);
  if (!name) throw new Error(`a change of unknown type ${change.type}`);
  return name;
}

/**
 * A change as the API writes it, as JSON text: the record (already JSON text from the records
 * service) and `previous` go in as they came; `previous` and `changed_fields` only where they
 * apply.
 */
export function changeJson(change: RecordChange): string {
  const type = changeTypeName(change);
  const parts = [
    `"change_id":${JSON.stringify(change.changeId)}`,
    `"type":"${type}"`,
    `"at":${JSON.stringify(timeOf(change.at))}`,
    `"organization_id":${idOf(change.organizationId)}`,
    `"database_id":${idOf(change.databaseId)}`,
    `"table_id":${idOf(change.tableId)}`,
    `"row_id":${idOf(change.rowId)}`,
    `"actor":{"type":${JSON.stringify(change.actor?.type ?? "system")},"id":${idOf(change.actor?.id ?? 0n)}}`,
    `"record":${change.record ? recordJson(change.record) : "null"}`,
  ];
  if (change.previousJson !== "") parts.push(`"previous":${change.previousJson}`);
  if (type === "record.updated")
    parts.push(`"changed_fields":${JSON.stringify(change.changedFields)}`);
  return `{${parts.join(",")}}`;
}
