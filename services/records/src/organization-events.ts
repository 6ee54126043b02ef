import { fromBinary } from "@bufbuild/protobuf";
import {
  type BusMessage,
  type Cache,
  consumeOnce,
  type EventBus,
  type Logger,
  markOrganizationDeleted,
  type Orm,
  SUBJECTS,
} from "@rowbase/kit";
import { OrganizationDeletedSchema } from "@rowbase/proto/rowbase/events/v1/org_events_pb";
import {
  deleteOrganizationRecords,
  deleteRecordsInChunks,
  markOrganizationGone,
  notProcessed,
  tablesWithRecords,
} from "./db/schema-changes.js";
import { dropOrganizationTables } from "./db/user-tables/schema-changes.js";

/** The durable consumer, also its name in `processed_event`. */
export const ORG_DELETED_CONSUMER = "records_org_deleted";

/**
 * Records' part of the organization deletion saga (`org.organization.deleted`, durable
 * `records_org_deleted`): under the organization's lock it marks the organization gone, so that
 * no create can follow (a transaction of its own), deletes its records a table at a time, a
 * chunk per statement (`deleteRecordsInChunks`), then, in the transaction that records the
 * event, what is left and its usage. Catalog's DatabaseDeleted events for the same tables
 * find no records left, and delete every table's autonumber counters, those of tables without
 * records included: records knows a table's organization only through its records. Applied
 * once (`consumeOnce`: the event id is recorded in the same transaction) and acknowledged after
 * the commit; a redelivery finds the event applied.
 */
export function listenForOrganizationDeletion(
  orm: Orm,
  bus: EventBus,
  deps: { cache: Cache; logger: Logger },
): Promise<{ stop(): Promise<void> }> {
  // What the chunks deleted before the transaction, by event id.
  const before = new Map<string, { tableIds: bigint[]; deleted: number }>();
  const beforeTransaction = async (message: BusMessage): Promise<void> => {
    before.delete(message.id);
    const { organizationId } = fromBinary(OrganizationDeletedSchema, message.data);
    const em = orm.em.fork();
    if (!(await notProcessed(em, ORG_DELETED_CONSUMER, message.id))) return;
    await em.transactional((tx) => markOrganizationGone(tx, organizationId));
    const tableIds = await tablesWithRecords(em, organizationId);
    let deleted = 0;
    for (const tableId of tableIds) deleted += await deleteRecordsInChunks(em, tableId);
    before.set(message.id, { tableIds, deleted });
  };
  return consumeOnce(
    orm,
    bus,
    { stream: "ORG", durable: ORG_DELETED_CONSUMER, subject: SUBJECTS.organizationDeleted },
    async (em, message) => {
      const event = fromBinary(OrganizationDeletedSchema, message.data);
      await markOrganizationGone(em, event.organizationId);
      await dropOrganizationTables(em, event.organizationId);
      const chunked = before.get(message.id) ?? { tableIds: [], deleted: 0 };
      before.delete(message.id);
      const deleted =
        chunked.deleted +
        (await deleteOrganizationRecords(em, event.organizationId, chunked.tableIds));
      return async () => {
        // Organization marked the plan entry when the deletion committed; again, for a commit
        // that could not reach the cache.
        await markOrganizationDeleted(deps.cache, event.organizationId);
        deps.logger.info(
          { organization_id: event.organizationId.toString(), records: deleted, event: message.id },
          "organization deleted: records removed",
        );
      };
    },
    { logger: deps.logger, beforeTransaction },
  );
}
