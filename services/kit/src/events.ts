import { create, type DescMessage, type MessageShape, toBinary } from "@bufbuild/protobuf";
import { timestampNow } from "@bufbuild/protobuf/wkt";
import type { EntityManager } from "@mikro-orm/postgresql";
import {
  type Actor,
  Actor_Type,
  ActorSchema,
  EventMetaSchema,
} from "@rowbase/proto/rowbase/events/v1/envelope_pb";
import type { StreamSpec } from "./bus.js";
import { enqueueEvent } from "./outbox.js";
import type { Principal } from "./principal.js";

const DAY = 24 * 3600;

/** The JetStream streams every service expects; `ensureStreams` creates them idempotently. */
export const STREAMS: StreamSpec[] = [
  { name: "CATALOG", subjects: ["catalog.>"], maxAgeSeconds: 7 * DAY },
  { name: "ORG", subjects: ["org.>"], maxAgeSeconds: 7 * DAY },
  { name: "AUDIT", subjects: ["audit.>"], maxAgeSeconds: 7 * DAY },
  { name: "USAGE", subjects: ["usage.>"], maxAgeSeconds: 7 * DAY },
];

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
  /** Audit events: `audit.<target type>.<verb>`, e.g. `audit.member.updated`. */
  audit: (action: string) => `audit.${action}`,
} as const;

/** The event actor for a principal. */
export function actorOf(principal: Principal | undefined): Actor {
  if (principal?.kind === "user")
    return create(ActorSchema, { type: Actor_Type.USER, id: principal.userId });
  if (principal?.kind === "api_token") {
    return create(ActorSchema, { type: Actor_Type.API_TOKEN, id: principal.tokenId });
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
  context: { principal?: Principal; requestId?: string },
): Promise<string> {
  const eventId = crypto.randomUUID();
  const meta = create(EventMetaSchema, {
    eventId,
    occurredAt: timestampNow(),
    actor: actorOf(context.principal),
    requestId: context.requestId ?? "",
  });
  const message = create(schema, { ...init, meta } as never);
  return enqueueEvent(em, subject, toBinary(schema, message), eventId);
}
