import { fromBinary } from "@bufbuild/protobuf";
import { type Cache, type EventBus, type Logger, planCacheKey, SUBJECTS } from "@rowbase/kit";
import { OrganizationDeletedSchema } from "@rowbase/proto/rowbase/events/v1/org_events_pb";
import type { Transactions } from "./change-set.js";
import {
  deleteOrganizationRecords,
  lockOrganizationExclusive,
  markProcessed,
} from "./db/record-store.js";
import { query } from "./db/sql.js";

const CONSUMER = "records_org_deleted";

/**
 * Records' part of the organization deletion saga (`org.organization.deleted`, durable
 * `records_org_deleted`): under the organization's lock it marks the organization gone, so that
 * no create can follow, and deletes its records and its usage row. Catalog's DatabaseDeleted
 * events for the same tables find nothing left. Acknowledged after the commit; a redelivery
 * finds the event applied.
 */
export function listenForOrganizationDeletion(
  bus: EventBus,
  deps: { tx: Transactions; cache: Cache; logger: Logger },
): Promise<{ stop(): Promise<void> }> {
  return bus.consume(
    { stream: "ORG", durable: CONSUMER, subject: SUBJECTS.organizationDeleted },
    async (message) => {
      const event = fromBinary(OrganizationDeletedSchema, message.data);
      const deleted = await deps.tx.run(
        { principal: undefined, requestId: event.meta?.requestId ?? "" },
        async ({ em }) => {
          if (!(await markProcessed(em, CONSUMER, message.id))) return 0;
          await lockOrganizationExclusive(em, event.organizationId);
          await query(
            em,
            "insert into deleted_organization (organization_id) values ($1) on conflict do nothing",
            [event.organizationId],
          );
          return deleteOrganizationRecords(em, event.organizationId);
        },
      );
      await deps.cache.del(planCacheKey(event.organizationId));
      deps.logger.info(
        { organization_id: event.organizationId.toString(), records: deleted, event: message.id },
        "organization deleted: records removed",
      );
    },
  );
}
