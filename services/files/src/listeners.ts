import { type DescMessage, fromBinary } from "@bufbuild/protobuf";
import { type BusMessage, type EventBus, type Logger, SUBJECTS } from "@rowbase/kit";
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
import type { CallContext } from "./change-set.js";
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

/**
 * Follows the events files depends on, each acknowledged only after its own commit:
 * - catalog (`catalog.>`): evicts cached table schemas; a deleted field, table or database
 *   deletes its files and their bytes;
 * - records (`records.deleted`): the files of deleted records are soft-deleted (purged 30 days
 *   later) and their rows closed to uploads;
 * - organization (`org.>`): a deleted organization's files go; a plan change evicts the cached
 *   plan.
 */
export async function listen(
  bus: EventBus,
  deps: { cleanup: Cleanup; upstream: Upstream; logger: Logger },
): Promise<Consumer[]> {
  const { cleanup, upstream, logger } = deps;
  const consumers: Consumer[] = [];
  try {
    consumers.push(
      await bus.consume(
        { stream: "CATALOG", durable: DURABLES.catalog, subject: SUBJECTS.catalogAny },
        async (message) => {
          switch (message.subject) {
            case SUBJECTS.fieldDeleted: {
              const event = fromBinary(FieldDeletedSchema, message.data);
              await upstream.evictTableSchemas([event.tableId]);
              const n = await cleanup.deleteScopes(
                systemContext(message, event.meta?.requestId),
                "field",
                [event.fieldId],
              );
              logger.info(
                { field_id: event.fieldId.toString(), files: n },
                "field deleted: files removed",
              );
              return;
            }
            case SUBJECTS.tableDeleted: {
              const event = fromBinary(TableDeletedSchema, message.data);
              await upstream.evictTableSchemas([event.tableId]);
              const n = await cleanup.deleteScopes(
                systemContext(message, event.meta?.requestId),
                "table",
                [event.tableId],
              );
              logger.info(
                { table_id: event.tableId.toString(), files: n },
                "table deleted: files removed",
              );
              return;
            }
            case SUBJECTS.databaseDeleted: {
              const event = fromBinary(DatabaseDeletedSchema, message.data);
              await upstream.evictTableSchemas(event.tableIds);
              const n = await cleanup.deleteScopes(
                systemContext(message, event.meta?.requestId),
                "table",
                event.tableIds,
              );
              logger.info(
                { database_id: event.databaseId.toString(), files: n },
                "database deleted: files removed",
              );
              return;
            }
            default: {
              const schema = TABLE_EVENTS[message.subject];
              if (!schema) return;
              const event = fromBinary(schema, message.data) as unknown as { tableId: bigint };
              await upstream.evictTableSchemas([event.tableId]);
            }
          }
        },
      ),
    );
    consumers.push(
      await bus.consume(
        { stream: "ORG", durable: DURABLES.organization, subject: "org.>" },
        async (message) => {
          if (message.subject === SUBJECTS.organizationDeleted) {
            const event = fromBinary(OrganizationDeletedSchema, message.data);
            const n = await cleanup.deleteScopes(
              systemContext(message, event.meta?.requestId),
              "organization",
              [event.organizationId],
            );
            await upstream.evictPlan(event.organizationId);
            logger.info(
              { organization_id: event.organizationId.toString(), files: n },
              "organization deleted: files removed",
            );
          } else if (message.subject === SUBJECTS.planChanged) {
            const event = fromBinary(PlanChangedSchema, message.data);
            await upstream.evictPlan(event.organizationId);
          }
        },
      ),
    );
    consumers.push(
      await bus.consume(
        { stream: "RECORDS", durable: DURABLES.records, subject: SUBJECTS.recordsDeleted },
        async (message) => {
          const event = fromBinary(RecordsDeletedSchema, message.data);
          const n = await cleanup.softDeleteRows(
            systemContext(message, event.meta?.requestId),
            event.rowIds,
          );
          if (n > 0) {
            logger.info({ rows: event.rowIds.length, files: n }, "records deleted: files deleted");
          }
        },
      ),
    );
  } catch (error) {
    for (const consumer of consumers) await consumer.stop();
    throw error;
  }
  return consumers;
}
