import {
  type CallContext,
  callAs,
  createServiceClient,
  type OutboxEntry,
  SUBJECTS,
} from "@rowbase/kit";
import { RecordsService } from "@rowbase/proto/rowbase/records/v1/records_service_pb";

/**
 * The catalog events that change records' stored values or tables: a field's type or choices,
 * a deleted field, table or database. Records' work for each may run twice at once (this
 * hand-off and the bus's copy, on two replicas) and ends the same. Not a new autonumber field:
 * numbering the existing records reserves numbers, and two reservations at once would leave a
 * gap; those numbers still come through the bus.
 */
const APPLIED_BY_RECORDS: ReadonlySet<string> = new Set([
  SUBJECTS.fieldDeleted,
  SUBJECTS.fieldTypeChanged,
  SUBJECTS.fieldChoicesRenamed,
  SUBJECTS.tableDeleted,
  SUBJECTS.databaseDeleted,
]);

/**
 * The catalog events records applies before catalog commits them: a new table's user table and
 * a new field's column exist by the time a client can write them. If records cannot, catalog
 * does not commit. Applied again once committed they change nothing, and if catalog then fails
 * to commit, a table or column nobody names is left behind, harmless.
 */
const APPLIED_BEFORE_COMMIT: ReadonlySet<string> = new Set([
  SUBJECTS.tableCreated,
  SUBJECTS.fieldCreated,
]);

/**
 * How long catalog waits for records to apply an event before it commits: a new autonumber
 * field numbers the table's records then.
 */
const BEFORE_COMMIT_TIMEOUT_MS = 8_000;

/**
 * How long catalog waits for records to apply one event. The change is committed by then, and
 * the event reaches records through the bus anyway, so past this the route answers without it.
 * A type change's check may already have taken up to its own deadline (kit's
 * `schemaChangeDeadlines`, SCHEMA_CHANGE_TIMEOUT_SECONDS): the gateway waits 2 s more than
 * that, so together they stay within its wait, and the client is never told 503 about a
 * committed change. For a type change the event only drops the column of the values as they
 * were (`f_<id>_prev`), which changes PostgreSQL's catalog and rewrites no row: milliseconds,
 * unless a long read holds the table (the DROP waits for it, records' ddl.ts); the bus's copy
 * drops it then.
 */
const APPLY_TIMEOUT_MS = 1_500;

/** Records' side of catalog's committed schema changes. */
export interface RecordsApply {
  /**
   * Whether records applies events of this subject (and so should be handed them), and when:
   * before catalog commits the event, or after.
   */
  applies(subject: string): "before_commit" | "after_commit" | undefined;
  /**
   * Hands records a committed event, which it applies at once, before catalog's route answers:
   * so the client's next request sees its values converted, its choices renamed, its rows gone.
   * The copy the bus delivers later finds it applied.
   */
  apply(entry: OutboxEntry, context: CallContext): Promise<void>;
}

/** `RecordsApply` through RecordsService.ApplyCatalogEvent, called as the catalog service. */
export function recordsApply(baseUrl: string, internalSecret: string): RecordsApply {
  const records = createServiceClient(RecordsService, baseUrl);
  return {
    applies: (subject) =>
      APPLIED_BEFORE_COMMIT.has(subject)
        ? "before_commit"
        : APPLIED_BY_RECORDS.has(subject)
          ? "after_commit"
          : undefined,
    async apply(entry, context) {
      const options = await callAs(
        internalSecret,
        { kind: "service", service: "catalog" },
        context.requestId,
      );
      await records.applyCatalogEvent(
        { subject: entry.subject, payload: entry.payload, eventId: entry.eventId },
        {
          ...options,
          timeoutMs: APPLIED_BEFORE_COMMIT.has(entry.subject)
            ? BEFORE_COMMIT_TIMEOUT_MS
            : APPLY_TIMEOUT_MS,
        },
      );
    },
  };
}
