import { toJson } from "@bufbuild/protobuf";
import { type Value, ValueSchema } from "@bufbuild/protobuf/wkt";
import {
  type AuditLogEntry,
  AuditLogEntry_Actor_Type,
  type AuditLogEntry_Change,
} from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import type { ListAuditEventsResponse } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import type { z } from "zod";
import { countOf, idOf, required, timeOf } from "../../presentation/wire-values.js";
import type {
  AuditActorTypeName,
  AuditChangeSchema,
  AuditEventSchema,
  AuditListSchema,
} from "./audit-schemas.js";

const ACTOR_TYPE_NAMES: Record<AuditLogEntry_Actor_Type, AuditActorTypeName | undefined> = {
  [AuditLogEntry_Actor_Type.UNSPECIFIED]: undefined,
  [AuditLogEntry_Actor_Type.USER]: "user",
  [AuditLogEntry_Actor_Type.API_TOKEN]: "api_token",
  [AuditLogEntry_Actor_Type.SYSTEM]: "system",
  [AuditLogEntry_Actor_Type.FORM]: "form",
};

function actorTypeName(type: AuditLogEntry_Actor_Type): AuditActorTypeName {
  const name = ACTOR_TYPE_NAMES[type];
  if (!name) throw new Error(`audit actor type ${type} has no REST name`);
  return name;
}

/** A value the change had or has; an unset one (no value) is `null`, as JSON's null is. */
function jsonValueOf(value: Value | undefined): unknown {
  return value ? toJson(ValueSchema, value) : null;
}

export function presentAuditChange(
  change: AuditLogEntry_Change,
): z.output<typeof AuditChangeSchema> {
  return {
    key: change.key,
    ...(change.label ? { label: change.label } : {}),
    old: jsonValueOf(change.oldValue),
    new: jsonValueOf(change.newValue),
  };
}

/**
 * One AuditEvent of `GET /audit/list`. `database_id` and `table_id` appear only for targets inside
 * a database or table (0 on the wire means none), `target.field_id` only for files, `via` only
 * for changes that came in through the MCP endpoint.
 */
export function presentAuditEvent(entry: AuditLogEntry): z.output<typeof AuditEventSchema> {
  const actor = required(entry.actor, "actor");
  const target = required(entry.target, "target");
  return {
    event_id: entry.eventId,
    at: timeOf(entry.at),
    organization_id: idOf(entry.organizationId),
    ...(entry.databaseId !== 0n ? { database_id: idOf(entry.databaseId) } : {}),
    ...(entry.tableId !== 0n ? { table_id: idOf(entry.tableId) } : {}),
    actor: { type: actorTypeName(actor.type), id: idOf(actor.id) },
    action: entry.action,
    target: {
      type: target.type,
      id: idOf(target.id),
      ...(target.fieldId !== 0n ? { field_id: idOf(target.fieldId) } : {}),
    },
    changes: entry.changes.map(presentAuditChange),
    ...(entry.via === "mcp" ? { via: entry.via } : {}),
  };
}

export function presentAuditList(
  response: ListAuditEventsResponse,
): z.output<typeof AuditListSchema> {
  return {
    events: response.events.map(presentAuditEvent),
    total: countOf(response.total),
  };
}
