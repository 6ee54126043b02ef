import { type Timestamp, timestampDate } from "@bufbuild/protobuf/wkt";
import { ChangeType, type RecordChange } from "@rowbase/proto/rowbase/records/v1/records_pb";

/** The event name of each change type, as the API and the `events` of a webhook name them. */
const TYPE_NAMES = new Map<ChangeType, string>([
  [ChangeType.CREATED, "record.created"],
  [ChangeType.UPDATED, "record.updated"],
  [ChangeType.DELETED, "record.deleted"],
]);

export function eventOf(change: RecordChange): string {
  const name = TYPE_NAMES.get(change.type);
  if (!name) throw new Error(`a change of unknown type ${change.type}`);
  return name;
}

function timeOf(timestamp: Timestamp | undefined): string {
  if (!timestamp) throw new Error("a change without its time");
  return timestampDate(timestamp).toISOString();
}

const id = (value: bigint) => value.toString();

/**
 * A change as a webhook's body: the JSON the feed and the stream give for it (the gateway's
 * change presenter writes the same), keyed by field id with every field. The record and
 * `previous` are JSON text from records already and go in as they came.
 */
export function changeBody(change: RecordChange): string {
  const type = eventOf(change);
  const record = change.record;
  const parts = [
    `"change_id":${JSON.stringify(change.changeId)}`,
    `"type":"${type}"`,
    `"at":${JSON.stringify(timeOf(change.at))}`,
    `"organization_id":${id(change.organizationId)}`,
    `"database_id":${id(change.databaseId)}`,
    `"table_id":${id(change.tableId)}`,
    `"row_id":${id(change.rowId)}`,
    `"actor":{"type":${JSON.stringify(change.actor?.type ?? "system")},"id":${id(change.actor?.id ?? 0n)}}`,
    `"record":${
      record
        ? `{"row_id":${id(record.rowId)},"table_id":${id(record.tableId)},"created_at":${JSON.stringify(timeOf(record.createdAt))},"updated_at":${JSON.stringify(timeOf(record.updatedAt))},"data":${record.dataJson === "" ? "{}" : record.dataJson}}`
        : "null"
    }`,
  ];
  if (change.previousJson !== "") parts.push(`"previous":${change.previousJson}`);
  if (type === "record.updated") {
    parts.push(`"changed_fields":${JSON.stringify(change.changedFields)}`);
  }
  return `{${parts.join(",")}}`;
}
