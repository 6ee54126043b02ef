import { createHash } from "node:crypto";
import { clone, create, type DescMessage, type MessageShape, toBinary } from "@bufbuild/protobuf";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import { timestampNow } from "@bufbuild/protobuf/wkt";
import type { EntityManager } from "@mikro-orm/postgresql";
import {
  type AuditEvent,
  AuditEvent_TargetSchema,
  type AuditEventBatch,
  AuditEventBatchSchema,
  AuditEventSchema,
} from "@rowbase/proto/rowbase/events/v1/audit_events_pb";
import {
  type Actor,
  Actor_Type,
  ActorSchema,
  EventMetaSchema,
} from "@rowbase/proto/rowbase/events/v1/envelope_pb";
import { type AuditChange, auditChangesJson, withSharedLabels } from "./audit-changes.js";
import type { StreamSpec } from "./bus.js";
import { enqueueEvent, type OutboxEntry } from "./outbox.js";
import type { Principal } from "./principal.js";
import { activeTraceparent } from "./tracing.js";

const DAY = 24 * 3600;

const MIB = 1024 ** 2;
const GIB = 1024 * MIB;

/**
 * The JetStream streams every service expects; `ensureStreams` creates them idempotently and
 * brings existing ones to these limits at every start.
 *
 * All keep messages by limits (never on acknowledgement: every service has its own durable
 * consumer, and one created later still reads the last 7 days). Consumers remember processed
 * ids for longer than that (`consumeOnce`), so no redelivery is ever applied twice. Streams fed
 * by an outbox refuse publishes when full (`discard: "new"`): the outbox keeps the events and
 * the relay retries, so a full stream delays events instead of dropping unconsumed ones.
 * USAGE is fed directly by the gateway (no outbox), so it drops its oldest instead. DEAD keeps
 * the messages consumers gave up on (`dead.<durable>`) for an operator to inspect and replay.
 * The 2-minute duplicate window covers the outbox relay's republish of a batch whose
 * "published" mark did not commit; later duplicates are caught by `consumeOnce`. The byte
 * limits (3 GiB in all) are reserved on the server by a deployment's un-namespaced streams
 * only (see `NatsBusOptions.reserveBytes`); its `max_file_store` must exceed their sum.
 */
export const STREAMS: StreamSpec[] = (
  [
    {
      name: "CATALOG",
      subjects: ["catalog.>"],
      maxAgeSeconds: 7 * DAY,
      maxBytes: 256 * MIB,
      discard: "new",
    },
    {
      name: "ORG",
      subjects: ["org.>"],
      maxAgeSeconds: 7 * DAY,
      maxBytes: 256 * MIB,
      discard: "new",
    },
    { name: "AUDIT", subjects: ["audit.>"], maxAgeSeconds: 7 * DAY, maxBytes: GIB, discard: "new" },
    { name: "USAGE", subjects: ["usage.>"], maxAgeSeconds: 7 * DAY, maxBytes: GIB, discard: "old" },
    {
      name: "RECORDS",
      subjects: ["records.>"],
      maxAgeSeconds: 7 * DAY,
      maxBytes: 256 * MIB,
      discard: "new",
    },
    {
      name: "DEAD",
      subjects: ["dead.>"],
      maxAgeSeconds: 30 * DAY,
      maxBytes: 256 * MIB,
      discard: "old",
    },
  ] satisfies StreamSpec[]
).map((spec): StreamSpec => ({ retention: "limits", duplicateWindowSeconds: 120, ...spec }));

/** Event subjects, one place for all publishers and consumers. */
export const SUBJECTS = {
  organizationCreated: "org.organization.created",
  organizationUpdated: "org.organization.updated",
  organizationDeleted: "org.organization.deleted",
  planChanged: "org.plan.changed",
  memberAdded: "org.member.added",
  memberUpdated: "org.member.updated",
  memberRemoved: "org.member.removed",
  /** Every member event, for membership cache eviction. */
  memberAny: "org.member.>",
  apiTokenCreated: "org.api_token.created",
  apiTokenRevoked: "org.api_token.revoked",
  inviteCreated: "org.invite.created",
  inviteStatusChanged: "org.invite.status_changed",
  databaseCreated: "catalog.database.created",
  databaseUpdated: "catalog.database.updated",
  databaseDeleted: "catalog.database.deleted",
  tableCreated: "catalog.table.created",
  tableUpdated: "catalog.table.updated",
  tableDeleted: "catalog.table.deleted",
  fieldCreated: "catalog.field.created",
  fieldUpdated: "catalog.field.updated",
  fieldDeleted: "catalog.field.deleted",
  fieldTypeChanged: "catalog.field.type_changed",
  fieldChoicesRenamed: "catalog.field.choices_renamed",
  /** Every catalog event, for schema cache eviction in records and files. */
  catalogAny: "catalog.>",
  /** Records deleted by a delete or batch delete, for the files service to clean up. */
  recordsDeleted: "records.deleted",
  /** Record-route calls counted by the gateway (ApiCallsCounted), on the USAGE stream. */
  apiCallsCounted: "usage.api_calls",
  /** File bytes moved, counted by the gateway (TransferCounted), on the USAGE stream. */
  transferCounted: "usage.transfer",
  /** Every usage event, for the organization service's daily aggregates. */
  usageAny: "usage.>",
  /** Every audit event, for the organization service's audit store. */
  auditAny: "audit.>",
  /** Audit events: `audit.<target type>.<verb>`, e.g. `audit.member.updated`. */
  audit: (action: string) => `audit.${action}`,
  /** Several audit events of one change in one message (AuditEventBatch, `compactAuditEvents`). */
  auditBatch: "audit.batch",
} as const;

/** The event actor for a principal. */
export function actorOf(principal: Principal | undefined): Actor {
  if (principal?.kind === "user")
    return create(ActorSchema, { type: Actor_Type.USER, id: principal.userId });
  if (principal?.kind === "api_token") {
    return create(ActorSchema, { type: Actor_Type.API_TOKEN, id: principal.tokenId });
  }
  if (principal?.kind === "form") {
    return create(ActorSchema, { type: Actor_Type.FORM, id: principal.formId });
  }
  return create(ActorSchema, { type: Actor_Type.SYSTEM, id: 0n });
}

/**
 * Writes an event into the outbox of the caller's transaction, with its `meta` filled in: a new
 * event id (also the JetStream message id), the time, the actor and the request id.
 */
export async function publishEvent<D extends DescMessage>(
  em: EntityManager,
  subject: string,
  schema: D,
  init: Omit<MessageShape<D>, "$typeName" | "meta">,
  context: EventContext,
): Promise<string> {
  const event = buildEvent(subject, schema, init, context);
  return enqueueEvent(em, subject, event.payload, event.eventId);
}

/** Who and what an event's `meta` names. */
export interface EventContext {
  principal?: Principal;
  requestId?: string;
}

/**
 * An event's `meta`: a new event id (also the JetStream message id), the time, the actor, and
 * the trace of the work writing it, which its consumers continue (`eventTraceparent`).
 */
function eventMeta(context: EventContext) {
  return create(EventMetaSchema, {
    eventId: crypto.randomUUID(),
    occurredAt: timestampNow(),
    actor: actorOf(context.principal),
    requestId: context.requestId ?? "",
    traceparent: activeTraceparent(),
    via: (context.principal?.kind === "api_token" && context.principal.via) || "",
  });
}

/**
 * The trace context of the work that wrote an event message, "" for a message that is not an
 * event or carries none (written before contexts were, or outside any trace). Read from the
 * encoding without knowing the event's type: every event's `meta` is its field 1, and its
 * `traceparent` field 5 of that. An `audit.batch` carries it once, for all its events
 * (AuditEventBatch.traceparent, field 2), which are not decoded.
 */
export function eventTraceparent(subject: string, data: Uint8Array): string {
  try {
    if (subject === SUBJECTS.auditBatch) return lastString(data, 2);
    const meta = lastBytes(data, 1);
    return meta ? lastString(meta, 5) : "";
  } catch {
    return "";
  }
}

/**
 * A message's length-delimited field `field`, undecoded: the last occurrence, as a decoder
 * reads a singular field sent more than once.
 */
function lastBytes(data: Uint8Array, field: number): Uint8Array | undefined {
  const reader = new BinaryReader(data);
  let found: Uint8Array | undefined;
  while (reader.pos < reader.len) {
    const [number, wireType] = reader.tag();
    if (number === field && wireType === WireType.LengthDelimited) found = reader.bytes();
    else reader.skip(wireType, number);
  }
  return found;
}

function lastString(data: Uint8Array, field: number): string {
  const bytes = lastBytes(data, field);
  return bytes ? new TextDecoder().decode(bytes) : "";
}

/**
 * An event as `publishEvent` writes it (a new id, `meta` filled in), for a caller that writes
 * many at once (`enqueueEvents`).
 */
export function buildEvent<D extends DescMessage>(
  subject: string,
  schema: D,
  init: Omit<MessageShape<D>, "$typeName" | "meta">,
  context: EventContext,
): OutboxEntry {
  const meta = eventMeta(context);
  const message = create(schema, { ...init, meta } as never);
  return { subject, payload: toBinary(schema, message), eventId: meta.eventId };
}

/** An audit event with its `meta` filled in, not yet encoded. */
export function buildAuditEvent(
  init: Omit<AuditEvent, "$typeName" | "meta">,
  context: EventContext,
): AuditEvent {
  return create(AuditEventSchema, { ...init, meta: eventMeta(context) });
}

/** The most bytes of audit events `compactAuditEvents` puts in one message (NATS allows 1 MiB). */
export const AUDIT_BATCH_BYTES = 256 * 1024;

/** One event of a compact `audit.batch` (`compactAuditEvents`): its target's id and changes. */
export interface CompactAuditItem {
  targetId: bigint;
  /** What AuditEvent.changes_json holds (`auditChangesJson`). */
  changes: readonly AuditChange[];
}

/**
 * What a compact message spends on its shared parts besides the labels: the budget for its
 * items is the rest.
 */
const COMPACT_SHARED_BYTES = 4 * 1024;

/** The longest labels JSON a compact message shares (a quarter of its budget). */
const MAX_SHARED_LABELS_LENGTH = AUDIT_BATCH_BYTES / 4;

/**
 * Audit events that differ only in their target's id and changes (the records of one batch
 * write), as outbox entries: a lone one is an ordinary event on its own subject
 * (`audit.<action>`); more go in `audit.batch` messages of the compact form
 * (AuditEventBatch.common, target_ids, changes_json, labels_json), which carry the shared parts
 * once (the changes' labels too) and each record's id and changes, so that neither side builds
 * or decodes an event per record. A message holds items and labels up to AUDIT_BATCH_BYTES of
 * text (counted in UTF-16 units: at most three bytes each, still far under the bus's limit);
 * an item over the budget goes alone. `common.target.id` is ignored (0 in the message).
 */
export function compactAuditEvents(
  common: Omit<AuditEvent, "$typeName" | "meta" | "changesJson">,
  items: readonly CompactAuditItem[],
  context: EventContext,
): OutboxEntry[] {
  const [first] = items;
  if (first === undefined) return [];
  if (items.length === 1) {
    const event = buildAuditEvent(
      {
        ...common,
        target: targetWithId(common, first.targetId),
        changesJson: auditChangesJson(first.changes),
      },
      context,
    );
    return [
      {
        subject: SUBJECTS.audit(event.action),
        payload: toBinary(AuditEventSchema, event),
        eventId: event.meta!.eventId,
      },
    ];
  }
  const labels = new Map<string, string>();
  let compacted = items.map((item) => ({
    targetId: item.targetId,
    changesJson: auditChangesJson(withoutSharedLabels(item.changes, labels)),
  }));
  let labelsJson = labels.size > 0 ? JSON.stringify(Object.fromEntries(labels)) : "";
  // Labels too long to share in every message (fields named at great length) stay in place.
  if (labelsJson.length > MAX_SHARED_LABELS_LENGTH) {
    labelsJson = "";
    compacted = items.map((item) => ({
      targetId: item.targetId,
      changesJson: auditChangesJson(item.changes),
    }));
  }
  const budget = AUDIT_BATCH_BYTES - COMPACT_SHARED_BYTES - labelsJson.length;
  const entries: OutboxEntry[] = [];
  const message = (chunk: typeof compacted): OutboxEntry => {
    const meta = eventMeta(context);
    const batch = create(AuditEventBatchSchema, {
      traceparent: meta.traceparent,
      common: create(AuditEventSchema, {
        ...common,
        meta: { ...meta, traceparent: "" },
        target: targetWithId(common, 0n),
        changesJson: "",
      }),
      targetIds: chunk.map((item) => item.targetId),
      changesJson: `[${chunk.map((item) => item.changesJson || "[]").join(",")}]`,
      labelsJson,
    });
    return {
      subject: SUBJECTS.auditBatch,
      payload: toBinary(AuditEventBatchSchema, batch),
      eventId: meta.eventId,
    };
  };
  let start = 0;
  let size = 0;
  compacted.forEach((item, i) => {
    const itemSize = item.changesJson.length + 12;
    if (i > start && size + itemSize > budget) {
      entries.push(message(compacted.slice(start, i)));
      start = i;
      size = 0;
    }
    size += itemSize;
  });
  entries.push(message(compacted.slice(start)));
  return entries;
}

/**
 * `changes` without the labels that `labels` (key to label, shared by a compact message's
 * changes) holds: a key's first label is shared from then on; a change whose label differs
 * from its key's shared one keeps it.
 */
function withoutSharedLabels(
  changes: readonly AuditChange[],
  labels: Map<string, string>,
): AuditChange[] {
  return changes.map((change) => {
    const { label } = change;
    if (label === undefined) return change;
    const shared = labels.get(change.key);
    if (shared === undefined) labels.set(change.key, label);
    else if (shared !== label) return change;
    // Built field by field, in the change's order: an object rest copy is several times slower,
    // and a batch has a change per value of each of its 1,000 records.
    const unlabelled: AuditChange = { key: change.key };
    if (change.old !== undefined) unlabelled.old = change.old;
    if (change.new !== undefined) unlabelled.new = change.new;
    return unlabelled;
  });
}

/**
 * The id of event `index` (0-based) of the compact `audit.batch` message `messageId`: a UUID
 * made from both (MD5), the same every time, which the audit store gives the event as it
 * lists it (organization's AuditLog, in SQL, the same way).
 */
export function compactAuditEventId(messageId: string, index: number): string {
  const hex = createHash("md5")
    .update(`${messageId}:${index + 1}`)
    .digest("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/**
 * The events of an `audit.batch` message (`messageId` its id), in order, as if each had come
 * alone: those it holds, or those of its compact form with their ids and changes filled in.
 */
export function auditBatchEvents(batch: AuditEventBatch, messageId: string): AuditEvent[] {
  const { common } = batch;
  if (!common) return batch.events;
  const changes = JSON.parse(batch.changesJson || "[]") as AuditChange[][];
  const labels = JSON.parse(batch.labelsJson || "null") as Record<string, string> | null;
  return batch.targetIds.map((id, index) => {
    const meta = clone(EventMetaSchema, common.meta ?? create(EventMetaSchema));
    meta.eventId = compactAuditEventId(messageId, index);
    return create(AuditEventSchema, {
      ...common,
      meta,
      target: targetWithId(common, id),
      changesJson: JSON.stringify(withSharedLabels(changes[index] ?? [], labels)),
    });
  });
}

/** `event`'s target with the id `id`. */
function targetWithId(event: Pick<AuditEvent, "target">, id: bigint) {
  return create(AuditEvent_TargetSchema, {
    type: event.target?.type ?? "",
    id,
    fieldId: event.target?.fieldId ?? 0n,
  });
}
