import { fromBinary } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { QueryResult } from "@mikro-orm/core";
import type { EntityManager } from "@mikro-orm/postgresql";
import {
  type AuditChange,
  type BusMessage,
  Code,
  domainError,
  jsonArrayText,
  type Logger,
  query,
  type ReadStatement,
  SUBJECTS,
  validationFailed,
  withSharedLabels,
} from "@rowbase/kit";
import {
  type AuditEvent,
  type AuditEventBatch,
  AuditEventBatchSchema,
  AuditEventSchema,
} from "@rowbase/proto/rowbase/events/v1/audit_events_pb";
import { Actor_Type } from "@rowbase/proto/rowbase/events/v1/envelope_pb";
import { authorize } from "./access.js";
import type { ScopeOwners } from "./audit-scope-owners.js";
import type { Transactions, UserCall } from "./change-set.js";
import { auditQueryOf, type TimeRange, totalParts } from "./domain/audit-query.js";
import {
  expiredPartitions,
  monthStart,
  nextMonthStart,
  partitionName,
  retentionCutoff,
  utcLiteral,
} from "./domain/audit-retention.js";

export type ActorType = "user" | "api_token" | "system" | "form";

/** One stored audit event. Ids of "no database"/"no table" are null here, 0 on the wire. */
export interface AuditEntry {
  eventId: string;
  at: Date;
  organizationId: bigint;
  databaseId: bigint | null;
  tableId: bigint | null;
  actor: { type: ActorType; id: bigint };
  action: string;
  target: { type: string; id: bigint; fieldId: bigint | null };
  changes: AuditChange[];
  /** How the change came in when not through the REST API ("mcp"), else null. */
  via: string | null;
}

export type AuditScope =
  | { case: "organizationId"; value: bigint }
  | { case: "databaseId"; value: bigint }
  | { case: "tableId"; value: bigint };

/** The list parameters as they come in (proto fields; limit 0 is "unset"). */
export interface AuditListInput {
  limit: number;
  offset: number;
  since?: Date | undefined;
  until?: Date | undefined;
  action: string;
}

interface AuditRow {
  event_id: string;
  /** ISO 8601 in UTC with milliseconds (raw queries return timestamps as text). */
  at_iso: string;
  organization_id: string;
  database_id: string | null;
  table_id: string | null;
  actor_type: ActorType;
  actor_id: string;
  action: string;
  target_type: string;
  target_id: string;
  target_field_id: string | null;
  changes: AuditChange[];
  /** A group's shared labels (AuditEventBatch.labels_json), for its changes that have none. */
  labels: Record<string, string> | null;
  via: string | null;
}

/** A row of the list's answer: an event, or all nulls when the page is empty. */
type PageRow = AuditRow | { [K in keyof AuditRow]: null };

const ACTOR_TYPES: Partial<Record<Actor_Type, ActorType>> = {
  [Actor_Type.USER]: "user",
  [Actor_Type.API_TOKEN]: "api_token",
  [Actor_Type.FORM]: "form",
};

/** Serializes partition changes between replicas (creating and dropping). */
const PARTITION_LOCK =
  "select pg_advisory_xact_lock(hashtext('organization.audit_event_partitions'))";

/** A scope as `audit_count` names it. */
const SCOPE_NAMES = {
  organizationId: "organization",
  databaseId: "database",
  tableId: "table",
} as const;

const nullIfZero = (id: bigint) => (id === 0n ? null : id);
const bigintOrNull = (value: string | null) => (value === null ? null : BigInt(value));

/** The columns of `audit_event` that the events of a compact `audit.batch` share. */
function sharedColumns(event: AuditEvent, messageId: string, at: Date) {
  const actor = event.meta?.actor;
  return {
    message_id: messageId,
    at: at.toISOString(),
    organization_id: String(event.organizationId),
    database_id: nullIfZero(event.databaseId)?.toString() ?? null,
    table_id: nullIfZero(event.tableId)?.toString() ?? null,
    actor_type: (actor && ACTOR_TYPES[actor.type]) ?? "system",
    actor_id: String(actor?.id ?? 0n),
    action: event.action,
    target_type: event.target?.type ?? "",
    target_field_id: nullIfZero(event.target?.fieldId ?? 0n)?.toString() ?? null,
    request_id: event.meta?.requestId || null,
    via: event.meta?.via || null,
  };
}

/**
 * One event as a row of `audit_event`, as the JSON text `AuditLog.apply` inserts from. Its
 * `changes` stay the event's `changes_json` text, a string in the row that PostgreSQL casts:
 * parsing them here only to write them out again cost a third of the consumer's time.
 */
function rowJson(event: AuditEvent, messageId: string, at: Date): string {
  return JSON.stringify({
    ...sharedColumns(event, messageId, at),
    event_id: event.meta?.eventId || messageId,
    target_id: String(event.target?.id ?? 0n),
    changes: event.changesJson || "[]",
  });
}

/**
 * A compact `audit.batch` (AuditEventBatch.common) as the JSON text `AuditLog.apply` stores as
 * one row of its events (a group, migrations AuditGroups, AuditGroupLabels and
 * AuditGroupChangesJson): the shared columns, the target ids and the labels its changes share,
 * put in as they are. Its changes go beside it, in `apply`'s changes parameter.
 */
function compactJson(batch: AuditEventBatch, messageId: string, at: Date): string {
  const shared = JSON.stringify({
    ...sharedColumns(batch.common!, messageId, at),
    target_ids: batch.targetIds.map(String),
  });
  return `${shared.slice(0, -1)},"labels":${batch.labelsJson || "null"}}`;
}

/**
 * The audit store: every AuditEvent of the AUDIT stream, kept 90 days in the
 * monthly partitions of `audit_event`, listed per organization, database or table to members
 * of the organization. A database or table scope is resolved to its organization from the
 * stored events (they carry it, and ids are never reused), else from the catalog when one is
 * configured, so that a live database without events answers an empty list to members; a
 * scope nobody can resolve answers its 404, like a non-member.
 */
export class AuditLog {
  constructor(
    private readonly deps: {
      tx: Transactions;
      /** Absent without CATALOG_GRPC_URL: scopes resolve from stored events only. */
      owners?: ScopeOwners | undefined;
      logger: Logger;
      /** Sends a list's statement, within the list timeout (kit `listReads`). */
      read: ReadStatement;
    },
  ) {}

  /**
   * Stores AUDIT messages (each an `AuditEvent`, or on `audit.batch` an `AuditEventBatch` of
   * them) that `consumer` has not stored yet, in one statement: their ids claimed in
   * `processed_event` and the rows of the claimed ones inserted, atomically (see
   * `consumeClaimed`), from two JSON parameters (real parameters: `em.execute` would quote
   * them into the SQL text, which cost more than the insert; written as bytes, `jsonArrayText`):
   * a row per event, and the compact `audit.batch` messages (`compactJson`), each stored as
   * one row holding its events (`list` gives each event the id kit `compactAuditEventId`
   * makes from the message's id and the event's place); and a third, the compact messages'
   * changes as the producer wrote them (AuditEventBatch.changes_json), one element per
   * message in the same order, which PostgreSQL checks and stores as `json` without
   * building a `jsonb` document of them.
   * Events already past the retention (delivered more than 90 days late) are not stored.
   * Returns how many events it offered.
   */
  async apply(
    em: EntityManager,
    consumer: string,
    messages: readonly BusMessage[],
    now = new Date(),
  ): Promise<number> {
    const cutoff = retentionCutoff(now).getTime();
    const rows: string[] = [];
    const compact: string[] = [];
    const groupChanges: string[] = [];
    let offered = 0;
    const atOf = (event: AuditEvent | undefined) =>
      event?.meta?.occurredAt ? timestampDate(event.meta.occurredAt) : now;
    for (const message of messages) {
      if (message.subject !== SUBJECTS.auditBatch) {
        const event = fromBinary(AuditEventSchema, message.data);
        const at = atOf(event);
        if (at.getTime() >= cutoff) rows.push(rowJson(event, message.id, at));
        continue;
      }
      const batch = fromBinary(AuditEventBatchSchema, message.data);
      if (batch.common) {
        const at = atOf(batch.common);
        if (at.getTime() >= cutoff) {
          compact.push(compactJson(batch, message.id, at));
          groupChanges.push(batch.changesJson || "[]");
          offered += batch.targetIds.length;
        }
        continue;
      }
      for (const event of batch.events) {
        const at = atOf(event);
        if (at.getTime() >= cutoff) rows.push(rowJson(event, message.id, at));
      }
    }
    await query(
      em,
      `with claimed as (
         insert into processed_event (consumer, event_id) select $1, unnest($2::text[])
         on conflict (consumer, event_id) do nothing returning event_id
       )
       insert into audit_event (event_id, at, organization_id, database_id, table_id,
         actor_type, actor_id, action, target_type, target_id, target_field_id, changes,
         request_id, via, events, target_ids, labels, group_changes)
       select e.event_id, e.at, e.organization_id, e.database_id, e.table_id, e.actor_type,
         e.actor_id, e.action, e.target_type, e.target_id, e.target_field_id, e.changes::jsonb,
         e.request_id, e.via, 1, null, null, null
       from jsonb_to_recordset($3::text::jsonb) as e(message_id text, event_id text, at timestamptz,
         organization_id bigint, database_id bigint, table_id bigint, actor_type text,
         actor_id bigint, action text, target_type text, target_id bigint,
         target_field_id bigint, changes text, request_id text, via text)
       where e.message_id in (select event_id from claimed)
       union all
       select c.message_id, c.at, c.organization_id, c.database_id, c.table_id, c.actor_type,
         c.actor_id, c.action, c.target_type, g.ids[1], c.target_field_id, '[]',
         c.request_id, c.via, cardinality(g.ids), g.ids,
         case when jsonb_typeof(m.batch -> 'labels') = 'object' then m.batch -> 'labels' end,
         case when json_typeof(m.changes) = 'array' then m.changes else '[]' end
       from rows from (jsonb_array_elements($4::text::jsonb), json_array_elements($5::text::json))
           as m(batch, changes)
         cross join lateral jsonb_to_record(m.batch) as c(message_id text, at timestamptz,
           organization_id bigint, database_id bigint, table_id bigint, actor_type text,
           actor_id bigint, action text, target_type text, target_field_id bigint,
           request_id text, via text)
         cross join lateral (
           select array(select jsonb_array_elements_text(m.batch -> 'target_ids')::bigint) as ids
         ) g
       where c.message_id in (select event_id from claimed) and cardinality(g.ids) > 0
       on conflict do nothing`,
      [
        consumer,
        [...new Set(messages.map((m) => m.id))],
        jsonArrayText(rows),
        jsonArrayText(compact),
        jsonArrayText(groupChanges),
      ],
      { prepare: true },
    );
    return rows.length + offered;
  }

  /**
   * One page of a scope's events, newest first, with the total that match. Every member of the
   * organization may read; anyone else gets the scope's 404.
   */
  async list(
    call: UserCall,
    scope: AuditScope,
    input: AuditListInput,
    now = new Date(),
  ): Promise<{ entries: AuditEntry[]; total: bigint }> {
    const query = auditQueryOf(input);
    if ("problems" in query) throw validationFailed(query.problems);
    const em = this.deps.tx.em();
    const column = {
      organizationId: "organization_id",
      databaseId: "database_id",
      tableId: "table_id",
    }[scope.case];
    const organizationId = await this.organizationOf(em, call, scope);

    const cutoff = retentionCutoff(now);
    const since = query.since && query.since > cutoff ? query.since : cutoff;
    const params: unknown[] = [];
    /** `value` as the statement's next parameter. */
    const param = (value: unknown) => `$${params.push(value)}`;
    const action = query.action ? ` and action = ${param(query.action)}` : "";
    const scopeId = param(scope.value);
    const organization = param(organizationId);
    /** The scope's events in `range`, with the list's action filter. */
    const events = ({ from, to }: TimeRange) =>
      `${column} = ${scopeId} and organization_id = ${organization} and at >= ${param(from)}${
        to ? ` and at < ${param(to)}` : ""
      }${action}`;
    // The total: the hours the range covers whole from their kept counts, the events of the
    // partial hours at its ends one by one (migration AuditCounts).
    const { whole, partial } = totalParts(since, query.until);
    const parts = partial.map(
      (range) => `(select coalesce(sum(events), 0) from audit_event where ${events(range)})`,
    );
    if (whole) {
      parts.push(
        `(select coalesce(sum(n), 0) from audit_count
          where scope = ${param(SCOPE_NAMES[scope.case])} and scope_id = ${scopeId}
            and organization_id = ${organization} and hour >= ${param(whole.from)}
            ${whole.to ? `and hour < ${param(whole.to)}` : ""}${action})`,
      );
    }
    // The total and the page in one statement, so one snapshot: as two, an event stored between
    // them made the total disagree with the page. The total's row stays when the page is empty
    // (an offset past the end); its columns are then null. The page's rows come from the scope's
    // index alone, the rows before it skipped by a running sum of their events (a group counts
    // all of its own); then only the page's rows are read, a group's events taken from it in
    // its order, each with its own id (kit `compactAuditEventId`, made the same way), and its
    // changes from `group_changes` (or `changes`, for a group stored before that column).
    const offset = param(query.offset);
    const end = param(query.offset + query.limit);
    const rows = await this.deps.read<PageRow & { total: string }>(
      `select t.total, x.event_id, e.at,
         to_char(e.at at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as at_iso,
         e.organization_id, e.database_id, e.table_id, e.actor_type, e.actor_id, e.action,
         e.target_type, x.target_id, e.target_field_id, x.changes, e.labels, e.via
       from (select (${parts.join(" + ")})::bigint as total) t
       left join lateral (
         select r.event_id, r.at, r.through - r.events as before
         from (
           select event_id, at, events,
             sum(events) over (order by at desc, event_id desc rows unbounded preceding) as through
           from audit_event
           where ${events({ from: since, to: query.until })}
           order by at desc, event_id desc
         ) r
         where r.through > ${offset}
         limit ${param(query.limit)}
       ) p on true
       left join audit_event e on e.event_id = p.event_id and e.at = p.at
       left join lateral (
         select e.event_id, e.target_id, e.changes, 1::bigint as n where e.target_ids is null
         union all
         select md5(e.event_id || ':' || g.n)::uuid::text, g.id, coalesce(g.changes::jsonb, '[]'),
           g.n
         from rows from (
           unnest(e.target_ids), json_array_elements(coalesce(e.group_changes, e.changes::json))
         ) with ordinality as g(id, changes, n)
         where e.target_ids is not null and g.id is not null
       ) x on p.before + x.n > ${offset} and p.before + x.n <= ${end}
       order by p.at desc, p.event_id desc, x.n`,
      params,
    );
    const entries = rows.filter(
      (row): row is AuditRow & { total: string } => row.event_id !== null,
    );
    return { entries: entries.map(toEntry), total: BigInt(rows[0]?.total ?? 0) };
  }

  /** The scope's organization, once the caller is known to be a member of it. */
  private async organizationOf(
    em: EntityManager,
    call: UserCall,
    scope: AuditScope,
  ): Promise<bigint> {
    if (scope.case === "organizationId") {
      await authorize(em, scope.value, call.userId, "read", "organization_not_found");
      return scope.value;
    }
    const [column, notFound, fromCatalog] =
      scope.case === "databaseId"
        ? (["database_id", "database_not_found", this.deps.owners?.databaseOrganization] as const)
        : (["table_id", "table_not_found", this.deps.owners?.tableOrganization] as const);
    const [stored] = await em.execute<{ organization_id: string }[]>(
      `select organization_id from audit_event where ${column} = ? limit 1`,
      [scope.value],
    );
    const organizationId = stored
      ? BigInt(stored.organization_id)
      : await fromCatalog?.(scope.value, call.requestId);
    if (organizationId === undefined) throw domainError(Code.NotFound, notFound);
    await authorize(em, organizationId, call.userId, "read", notFound);
    return organizationId;
  }

  /**
   * Creates the monthly partition holding `month` unless it exists; returns whether it did.
   * Fails when the default partition already holds rows of that month (a partition cannot be
   * created over them): those rows then stay in the default partition, which expiry also
   * covers.
   */
  async ensurePartition(month: Date): Promise<boolean> {
    const name = partitionName(month);
    const from = utcLiteral(monthStart(month));
    const to = utcLiteral(nextMonthStart(month));
    return this.deps.tx.em().transactional(async (em) => {
      await em.execute("set local lock_timeout = '5s'");
      await em.execute(PARTITION_LOCK);
      const [found] = await em.execute<{ oid: string | null }[]>(
        "select to_regclass(?)::text as oid",
        [name],
      );
      if (found?.oid) return false;
      // The name and bounds come from a Date, never from input.
      await em.execute(
        `create table ${name} partition of audit_event for values from ('${from}') to ('${to}')`,
      );
      return true;
    });
  }

  /**
   * The 90-day expiry: drops the monthly partitions that lie wholly before the cutoff, then
   * deletes the older rows of the partition that straddles it (and of the default partition).
   * Run hourly, the delete only ever meets an hour's worth of rows.
   */
  async expire(now = new Date()): Promise<{ droppedPartitions: string[]; deletedRows: number }> {
    const em = this.deps.tx.em();
    const partitions = await em.execute<{ name: string }[]>(
      `select c.relname as name from pg_inherits i join pg_class c on c.oid = i.inhrelid
       where i.inhparent = 'audit_event'::regclass`,
    );
    const droppedPartitions = expiredPartitions(
      partitions.map((p) => p.name),
      now,
    );
    if (droppedPartitions.length > 0) {
      await em.fork().transactional(async (tx) => {
        await tx.execute("set local lock_timeout = '5s'");
        await tx.execute(PARTITION_LOCK);
        for (const name of droppedPartitions) await tx.execute(`drop table if exists ${name}`);
      });
    }
    const cutoff = retentionCutoff(now);
    const deleted = await em
      .fork()
      .execute<QueryResult>("delete from audit_event where at < ?", [cutoff], "run");
    // The counts of the hours wholly before the cutoff, which no list sums (those of dropped
    // partitions included: dropping a table fires no trigger).
    await em
      .fork()
      .execute("delete from audit_count where hour + interval '1 hour' <= ?", [cutoff]);
    return { droppedPartitions, deletedRows: deleted.affectedRows };
  }

  /**
   * The periodic job: this month's and next month's partitions exist, expired events are gone.
   * Failures are logged, never thrown: the next run tries again, and events still land in the
   * default partition meanwhile.
   */
  async maintain(now = new Date()): Promise<void> {
    for (const month of [monthStart(now), nextMonthStart(now)]) {
      try {
        if (await this.ensurePartition(month)) {
          this.deps.logger.info({ partition: partitionName(month) }, "audit partition created");
        }
      } catch (error) {
        this.deps.logger.warn(
          { err: error, partition: partitionName(month) },
          "audit partition not created",
        );
      }
    }
    try {
      const expired = await this.expire(now);
      if (expired.droppedPartitions.length > 0 || expired.deletedRows > 0) {
        this.deps.logger.info(
          { dropped: expired.droppedPartitions, deleted: expired.deletedRows },
          "expired audit events removed",
        );
      }
    } catch (error) {
      this.deps.logger.warn({ err: error }, "audit expiry failed");
    }
  }
}

function toEntry(row: AuditRow): AuditEntry {
  return {
    eventId: row.event_id,
    at: new Date(row.at_iso),
    organizationId: BigInt(row.organization_id),
    databaseId: bigintOrNull(row.database_id),
    tableId: bigintOrNull(row.table_id),
    actor: { type: row.actor_type, id: BigInt(row.actor_id) },
    action: row.action,
    target: {
      type: row.target_type,
      id: BigInt(row.target_id),
      fieldId: bigintOrNull(row.target_field_id),
    },
    changes: withSharedLabels(row.changes, row.labels),
    via: row.via,
  };
}
