import { type Timestamp, timestampDate } from "@bufbuild/protobuf/wkt";
import {
  ChangeType,
  type RecordChange,
  type Record as RecordMessage,
} from "@rowbase/proto/rowbase/records/v1/records_pb";

/**
 * How a record and a change are written as JSON, by the gateway's feed and stream and by
 * webhooks' deliveries alike (docs/changes.md): one presenter, so that a webhook's body is the
 * feed's change byte for byte.
 */

/** The change types by the names the API and webhooks' `events` use, in their documented order. */
export const CHANGE_TYPES = ["record.created", "record.updated", "record.deleted"] as const;
export type ChangeTypeName = (typeof CHANGE_TYPES)[number];

const TYPE_VALUES: Record<ChangeTypeName, ChangeType> = {
  "record.created": ChangeType.CREATED,
  "record.updated": ChangeType.UPDATED,
  "record.deleted": ChangeType.DELETED,
};

const TYPE_NAMES = new Map<ChangeType, ChangeTypeName>(
  CHANGE_TYPES.map((name) => [TYPE_VALUES[name], name]),
);

export function changeTypeValue(name: ChangeTypeName): ChangeType {
  return TYPE_VALUES[name];
}

/** A change's `type` as the API names it. */
export function changeTypeName(change: RecordChange): ChangeTypeName {
  const name = TYPE_NAMES.get(change.type);
  if (!name) throw new Error(`a change of unknown type ${change.type}`);
  return name;
}

/** An int64 id as a JSON number (ids stay below 2^53). */
export function idOf(id: bigint): number {
  if (id > BigInt(Number.MAX_SAFE_INTEGER) || id < BigInt(Number.MIN_SAFE_INTEGER)) {
    throw new Error(`id ${id} does not fit a JSON number`);
  }
  return Number(id);
}

/** The last time `timeOf` wrote: the records of one batch share created_at and updated_at. */
let lastTime: { seconds: bigint; nanos: number; text: string } | undefined;

/** A time as RFC 3339 UTC with milliseconds. */
export function timeOf(timestamp: Timestamp | undefined): string {
  if (!timestamp) throw new Error("a required timestamp is missing from the service's answer");
  const { seconds, nanos } = timestamp;
  if (lastTime?.seconds === seconds && lastTime.nanos === nanos) return lastTime.text;
  const text = timestampDate(timestamp).toISOString();
  lastTime = { seconds, nanos, text };
  return text;
}

/**
 * A record as JSON text. `data` arrives as JSON text of an object, already keyed as the
 * response format says and with the values as the contract writes them, and goes in as it is.
 * `links_truncated` only when a link's value was cut.
 */
export function recordJson(record: RecordMessage | undefined): string {
  if (!record) throw new Error("a required record is missing from the service's answer");
  return `{"row_id":${idOf(record.rowId)},"table_id":${idOf(record.tableId)},"created_at":${JSON.stringify(timeOf(record.createdAt))},"updated_at":${JSON.stringify(timeOf(record.updatedAt))},"data":${record.dataJson === "" ? "{}" : record.dataJson}${record.linksTruncated.length > 0 ? `,"links_truncated":${JSON.stringify(record.linksTruncated)}` : ""}}`;
}

/**
 * A change as JSON text: the record (JSON text from the records service) and `previous` go in
 * as they came; `previous` and `changed_fields` only where they apply.
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
  if (type === "record.updated") {
    parts.push(`"changed_fields":${JSON.stringify(change.changedFields)}`);
  }
  return `{${parts.join(",")}}`;
}
