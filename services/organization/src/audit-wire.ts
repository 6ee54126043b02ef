import { create, fromJson } from "@bufbuild/protobuf";
import { timestampFromDate, ValueSchema } from "@bufbuild/protobuf/wkt";
import {
  type ApiStats,
  ApiStatsSchema,
  type AuditLogEntry,
  AuditLogEntry_Actor_Type,
  AuditLogEntry_ActorSchema,
  AuditLogEntry_ChangeSchema,
  AuditLogEntry_TargetSchema,
  AuditLogEntrySchema,
  DailyUsageSchema,
  TokenUsageSchema,
} from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import type { ActorType, AuditEntry } from "./audit-log.js";
import type { ApiStatsView } from "./usage-stats.js";

const ACTOR_TYPES: Record<ActorType, AuditLogEntry_Actor_Type> = {
  user: AuditLogEntry_Actor_Type.USER,
  api_token: AuditLogEntry_Actor_Type.API_TOKEN,
  system: AuditLogEntry_Actor_Type.SYSTEM,
  form: AuditLogEntry_Actor_Type.FORM,
};

export function toAuditLogEntry(entry: AuditEntry): AuditLogEntry {
  return create(AuditLogEntrySchema, {
    eventId: entry.eventId,
    at: timestampFromDate(entry.at),
    organizationId: entry.organizationId,
    databaseId: entry.databaseId ?? 0n,
    tableId: entry.tableId ?? 0n,
    actor: create(AuditLogEntry_ActorSchema, {
      type: ACTOR_TYPES[entry.actor.type],
      id: entry.actor.id,
    }),
    action: entry.action,
    target: create(AuditLogEntry_TargetSchema, {
      type: entry.target.type,
      id: entry.target.id,
      fieldId: entry.target.fieldId ?? 0n,
    }),
    changes: entry.changes.map((change) =>
      create(AuditLogEntry_ChangeSchema, {
        key: change.key,
        label: change.label ?? "",
        oldValue: "old" in change ? fromJson(ValueSchema, change.old ?? null) : undefined,
        newValue: "new" in change ? fromJson(ValueSchema, change.new ?? null) : undefined,
      }),
    ),
    via: entry.via ?? "",
  });
}

export function toApiStats(stats: ApiStatsView): ApiStats {
  return create(ApiStatsSchema, {
    fromDate: stats.from,
    toDate: stats.to,
    apiCalls: stats.apiCalls,
    transferBytes: stats.transferBytes,
    days: stats.days.map((day) => create(DailyUsageSchema, day)),
    tokens: stats.tokens.map((token) => create(TokenUsageSchema, token)),
  });
}
