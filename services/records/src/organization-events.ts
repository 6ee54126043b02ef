import { fromBinary } from "@bufbuild/protobuf";
import {
  type Cache,
  consumeOnce,
  type EventBus,
  type Logger,
  markOrganizationDeleted,
  type Orm,
  query,
  SUBJECTS,
} from "@rowbase/kit";
import { OrganizationDeletedSchema } from "@rowbase/proto/rowbase/events/v1/org_events_pb";
import { deleteOrganizationRecords, lockOrganizationExclusive } from "./db/record-store.js";

/** The durable consumer, also its name in `processed_event`. */
export const ORG_DELETED_CONSUMER = "records_org_deleted";

/**
 * Records' part of the organization deletion saga (`org.organization.deleted`, durable
 * `records_org_deleted`): under the organization's lock it marks the organization gone, so that
 * no create can follow, and deletes its records and its usage row. Catalog's DatabaseDeleted
 * events for the same tables find no records left, and delete every table's autonumber
 * counters, those of tables without records included: records knows a table's organization
 * only through its records. Applied once (`consumeOnce`: the event id is
 * recorded in the same transaction) and acknowledged after the commit; a redelivery finds the
 * event applied.
 */
export function listenForOrganizationDeletion(
  orm: Orm,
  bus: EventBus,
  deps: { cache: Cache; logger: Logger },
): Promise<{ stop(): Promise<void> }> {
  return consumeOnce(
    orm,
    bus,
    { stream: "ORG", durable: ORG_DELETED_CONSUMER, subject: SUBJECTS.organizationDeleted },
    async (em, message) => {
      const event = fromBinary(OrganizationDeletedSchema, message.data);
      await lockOrganizationExclusive(em, event.organizationId);
      await query(
        em,
        "insert into deleted_organization (organization_id) values ($1) on conflict do nothing",
        [event.organizationId],
      );
      const deleted = await deleteOrganizationRecords(em, event.organizationId);
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
    { logger: deps.logger },
  );
}
