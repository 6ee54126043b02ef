import { fromBinary } from "@bufbuild/protobuf";
import { type EventBus, type Logger, SUBJECTS } from "@rowbase/kit";
import { OrganizationDeletedSchema } from "@rowbase/proto/rowbase/events/v1/org_events_pb";
import type { Databases } from "./databases.js";

/**
 * Catalog's part of the organization deletion saga: on `org.organization.deleted` it deletes
 * the organization's databases (each announced with its tables, for records and files). The
 * message is acknowledged after the commit; a redelivery finds nothing left to delete.
 */
export function listenForOrganizationDeletion(
  bus: EventBus,
  databases: Databases,
  logger: Logger,
): Promise<{ stop(): Promise<void> }> {
  return bus.consume(
    { stream: "ORG", durable: "catalog_org_deleted", subject: SUBJECTS.organizationDeleted },
    async (message) => {
      const event = fromBinary(OrganizationDeletedSchema, message.data);
      const deleted = await databases.deleteForOrganization(
        { principal: undefined, requestId: event.meta?.requestId ?? "" },
        event.organizationId,
      );
      logger.info(
        { organization_id: event.organizationId.toString(), databases: deleted, event: message.id },
        "organization deleted: databases removed",
      );
    },
  );
}
