import { type DescMessage, fromBinary } from "@bufbuild/protobuf";
import type { EntityManager } from "@mikro-orm/postgresql";
import {
  type AfterCommit,
  type BusMessage,
  type CallContext,
  consumeOnce,
  type EventBus,
  type Logger,
  type Orm,
  SUBJECTS,
} from "@rowbase/kit";
import {
  ChoicesRenamedSchema,
  DatabaseDeletedSchema,
  FieldCreatedSchema,
  FieldDeletedSchema,
  FieldTypeChangedSchema,
  FieldUpdatedSchema,
  TableCreatedSchema,
  TableDeletedSchema,
  TableUpdatedSchema,
} from "@rowbase/proto/rowbase/events/v1/catalog_events_pb";
import {
  OrganizationDeletedSchema,
  PlanChangedSchema,
} from "@rowbase/proto/rowbase/events/v1/org_events_pb";
import { RecordsDeletedSchema } from "@rowbase/proto/rowbase/events/v1/records_events_pb";
import type { Cleanup } from "./cleanup.js";
import type { Upstream } from "./upstream.js";

type Consumer = { stop(): Promise<void> };

/** Durable consumer names of the files service (one per stream it reads). */
export const DURABLES = {
  catalog: "files_catalog",
  organization: "files_org",
  records: "files_records",
  membership: "files_membership",
} as const;

/** The events that name tables (for schema cache eviction), by subject. */
const TABLE_EVENTS: Record<string, DescMessage> = {
  [SUBJECTS.tableCreated]: TableCreatedSchema,
  [SUBJECTS.tableUpdated]: TableUpdatedSchema,
  [SUBJECTS.fieldCreated]: FieldCreatedSchema,
  [SUBJECTS.fieldUpdated]: FieldUpdatedSchema,
  [SUBJECTS.fieldTypeChanged]: FieldTypeChangedSchema,
  [SUBJECTS.fieldChoicesRenamed]: ChoicesRenamedSchema,
};

function systemContext(message: BusMessage, requestId: string | undefined): CallContext {
  return { principal: undefined, requestId: requestId || message.id };
}

/** What a deletion event removes the files of. */
interface DeletedScopes {
  kind: "organization" | "table" | "field";
  ids: bigint[];
  requestId: string | undefined;
  /** The tables whose cached schemas the event makes stale (catalog events). */
  tables: bigint[];
  /** The log line once its files are gone. */
  log: Record<string, string>;
  what: string;
}

/** What a deletion event removes the files of; undefined for the other events. */
function deletedScopes(message: BusMessage): DeletedScopes | undefined {
  switch (message.subject) {
    case SUBJECTS.fieldDeleted: {
      const event = fromBinary(FieldDeletedSchema, message.data);
      return {
        kind: "field",
        ids: [event.fieldId],
        requestId: event.meta?.requestId,
        tables: [event.tableId],
        log: { field_id: event.fieldId.toString() },
        what: "field deleted: files removed",
      };
    }
    case SUBJECTS.tableDeleted: {
      const event = fromBinary(TableDeletedSchema, message.data);
      return {
        kind: "table",
        ids: [event.tableId],
        requestId: event.meta?.requestId,
        tables: [event.tableId],
        log: { table_id: event.tableId.toString() },
        what: "table deleted: files removed",
      };
    }
    case SUBJECTS.databaseDeleted: {
      const event = fromBinary(DatabaseDeletedSchema, message.data);
      return {
        kind: "table",
        ids: event.tableIds,
        requestId: event.meta?.requestId,
        tables: event.tableIds,
        log: { database_id: event.databaseId.toString() },
        what: "database deleted: files removed",
      };
    }
    case SUBJECTS.organizationDeleted: {
      const event = fromBinary(OrganizationDeletedSchema, message.data);
      return {
        kind: "organization",
        ids: [event.organizationId],
        requestId: event.meta?.requestId,
        tables: [],
        log: { organization_id: event.organizationId.toString() },
        what: "organization deleted: files removed",
      };
    }
    default:
      return undefined;
  }
}

/**
 * Follows the events files depends on, each applied once per event id (`consumeOnce`: the id is
 * recorded in `processed_event` in the transaction that applies the event, and the message is
 * acknowledged only after the commit; bytes are handed to the collector after it):
 * - catalog (`catalog.>`): evicts cached table schemas; a deleted field, table or database
 *   deletes its files and their bytes (a chunk per transaction before the event's own,
 *   `Cleanup.deleteScopesInChunks`);
 * - records (`records.deleted`): the files of deleted records go with their usage and bytes,
 *   and their rows are closed to uploads;
 * - organization (`org.>`): a deleted organization's files go (in chunks too); a plan change evicts the cached
 *   plan.
 */
export async function listen(
  orm: Orm,
  bus: EventBus,
  deps: { cleanup: Cleanup; upstream: Upstream; logger: Logger },
): Promise<Consumer[]> {
  const { cleanup, upstream, logger } = deps;
  const consumers: Consumer[] = [];
  /** Before a deletion event's transaction: its files go in chunks (`deleteScopesInChunks`). */
  const deleteInChunks = async (message: BusMessage) => {
    const scopes = deletedScopes(message);
    if (!scopes) return;
    const { kind, ids, requestId } = scopes;
    const files = await cleanup.deleteScopesInChunks(systemContext(message, requestId), kind, ids);
    if (files > 0) {
      logger.info({ scope: kind, ids: ids.map(String), files }, "deleted scopes: files removed");
    }
  };
  /** The files of deleted scopes go in `em`; the log line and the bytes follow the commit. */
  const deleteScopes = async (
    em: EntityManager,
    message: BusMessage,
    scopes: DeletedScopes,
  ): Promise<AfterCommit> => {
    const { kind, ids, requestId, log, what } = scopes;
    const { result, afterCommit } = await cleanup.deleteScopes(
      em,
      systemContext(message, requestId),
      kind,
      ids,
    );
    return async () => {
      await afterCommit();
      logger.info({ ...log, files: result }, what);
    };
  };
  try {
    consumers.push(
      await consumeOnce(
        orm,
        bus,
        { stream: "CATALOG", durable: DURABLES.catalog, subject: SUBJECTS.catalogAny },
        async (em, message) => {
          const scopes = deletedScopes(message);
          if (scopes) {
            await upstream.evictTableSchemas(scopes.tables);
            return deleteScopes(em, message, scopes);
          }
          const schema = TABLE_EVENTS[message.subject];
          if (!schema) return;
          const event = fromBinary(schema, message.data) as unknown as { tableId: bigint };
          await upstream.evictTableSchemas([event.tableId]);
        },
        { logger, beforeTransaction: deleteInChunks },
      ),
    );
    consumers.push(
      await consumeOnce(
        orm,
        bus,
        { stream: "ORG", durable: DURABLES.organization, subject: "org.>" },
        async (em, message) => {
          const scopes = deletedScopes(message);
          if (scopes) {
            const done = await deleteScopes(em, message, scopes);
            return async () => {
              await done();
              for (const id of scopes.ids) await upstream.markOrganizationDeleted(id);
            };
          }
          if (message.subject === SUBJECTS.planChanged) {
            const event = fromBinary(PlanChangedSchema, message.data);
            await upstream.evictPlan(event.organizationId);
          }
        },
        { logger, beforeTransaction: deleteInChunks },
      ),
    );
    consumers.push(
      await consumeOnce(
        orm,
        bus,
        { stream: "RECORDS", durable: DURABLES.records, subject: SUBJECTS.recordsDeleted },
        async (em, message) => {
          const event = fromBinary(RecordsDeletedSchema, message.data);
          const { result: n, afterCommit } = await cleanup.deleteRows(
            em,
            systemContext(message, event.meta?.requestId),
            event.rowIds,
          );
          return async () => {
            await afterCommit();
            if (n > 0) {
              logger.info(
                { rows: event.rowIds.length, files: n },
                "records deleted: files removed",
              );
            }
          };
        },
        { logger },
      ),
    );
  } catch (error) {
    for (const consumer of consumers) await consumer.stop();
    throw error;
  }
  return consumers;
}
