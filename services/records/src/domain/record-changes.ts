import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { OutboxEntry, Principal } from "@rowbase/kit";
import type { ValueChange } from "./audit.js";
import type { StoredRecord } from "./record-output.js";

/** The outbox subject of a write's record changes; never published (change-set.ts). */
export const RECORD_CHANGES_SUBJECT = "records.changes";

/** One record change as a write hands it to the change log (sql/record_change_capture.sql). */
export interface RecordChangeEntry {
  type: "created" | "updated" | "deleted";
  row_id: string;
  /** The record after the change; before it, for a deletion. Keyed by field id. */
  data: JsonObject;
  /** Updated: the old values of the changed fields; deleted: every field. */
  previous?: JsonObject;
  /** Updated only: the ids of the changed fields, in field order. */
  changed_fields?: string[];
  /** The record's timestamps where the write knows them (absent: the write's now()). */
  created_ms?: number;
  updated_ms?: number;
}

/** A record a write created, with every value it holds. */
export function createdChange(rowId: bigint, data: JsonObject): RecordChangeEntry {
  return { type: "created", row_id: rowId.toString(), data };
}

/** A record a write changed, from the record before it, its values after it and what differs. */
export function updatedChange(
  before: StoredRecord,
  data: JsonObject,
  changed: readonly ValueChange[],
): RecordChangeEntry {
  const previous: JsonObject = {};
  for (const change of changed) previous[change.key] = change.old ?? null;
  return {
    type: "updated",
    row_id: before.rowId.toString(),
    data,
    previous,
    changed_fields: changed.map((change) => change.key),
    created_ms: before.createdAt.getTime(),
  };
}

/** A record a write deleted: `previous` holds every field of the table, null when empty. */
export function deletedChange(
  record: StoredRecord,
  fields: readonly { id: string }[],
): RecordChangeEntry {
  const previous: JsonObject = {};
  for (const field of fields) previous[field.id] = (record.data[field.id] ?? null) as JsonValue;
  return {
    type: "deleted",
    row_id: record.rowId.toString(),
    data: record.data,
    previous,
    created_ms: record.createdAt.getTime(),
    updated_ms: record.updatedAt.getTime(),
  };
}

/** Who a change names as its actor. */
function actorOf(principal: Principal | undefined): { type: string; id: string } {
  if (principal?.kind === "user") return { type: "user", id: principal.userId.toString() };
  if (principal?.kind === "api_token") {
    return { type: "api_token", id: principal.tokenId.toString() };
  }
  if (principal?.kind === "form") return { type: "form", id: principal.formId.toString() };
  return { type: "system", id: "0" };
}

/** The outbox row of one write's record changes (a JSON payload the capture trigger reads). */
export function recordChangesEntry(
  scope: { organizationId: bigint; databaseId: bigint; tableId: bigint },
  changes: readonly RecordChangeEntry[],
  principal: Principal | undefined,
): OutboxEntry {
  const write = {
    table_id: scope.tableId.toString(),
    organization_id: scope.organizationId.toString(),
    database_id: scope.databaseId.toString(),
    actor: actorOf(principal),
    changes,
  };
  return {
    subject: RECORD_CHANGES_SUBJECT,
    payload: Buffer.from(JSON.stringify(write)),
    eventId: crypto.randomUUID(),
    local: true,
  };
}
