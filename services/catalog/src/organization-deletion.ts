import { fromBinary } from "@bufbuild/protobuf";
import { consumeOnce, type EventBus, type Logger, type Orm, SUBJECTS } from "@rowbase/kit";
import { OrganizationDeletedSchema } from "@rowbase/proto/rowbase/events/v1/org_events_pb";
import type { Transactions } from "./change-set.js";
import { deleteOrganizationDatabases } from "./databases.js";

/** The durable consumer, also its name in `processed_event`. */
export const ORG_DELETED_CONSUMER = "catalog_org_deleted";

/**
 * Catalog's part of the organization deletion saga: on `org.organization.deleted` it deletes
 * the organization's databases (each announced with its tables, for records and files). The
 * event id is recorded in the same transaction, so a redelivery or a replay applies nothing;
 * the message is acknowledged after the commit.
 */
export function listenForOrganizationDeletion(
  orm: Orm,
  bus: EventBus,
  tx: Transactions,
  logger: Logger,
): Promise<{ stop(): Promise<void> }> {
  return consumeOnce(
    orm,
    bus,
    { stream: "ORG", durable: ORG_DELETED_CONSUMER, subject: SUBJECTS.organizationDeleted },
    async (em, message) => {
      const event = fromBinary(OrganizationDeletedSchema, message.data);
      const { result: deleted, afterCommit } = await tx.within(
        em,
        { principal: undefined, requestId: event.meta?.requestId ?? "" },
        (changes) => deleteOrganizationDatabases(changes, event.organizationId),
      );
      return async () => {
        await afterCommit();
        logger.info(
          {
            organization_id: event.organizationId.toString(),
            databases: deleted,
            event: message.id,
          },
          "organization deleted: databases removed",
        );
      };
    },
    { logger },
  );
}
