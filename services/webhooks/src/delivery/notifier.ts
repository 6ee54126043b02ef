import type { Client } from "@connectrpc/connect";
import { callAs, type Logger } from "@rowbase/kit";
import type { Mailer } from "@rowbase/kit/mailer";
import { Role } from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import type { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";

/** What a mail about a stopped webhook names. */
export interface StoppedWebhook {
  id: bigint;
  organizationId: bigint;
  tableId: bigint;
  url: string;
}

/**
 * Tells an organization's owner and admins that a webhook stopped after failures, by mail. The
 * members come from the organization service (ListMembers, as the webhooks service); a mail that
 * cannot be sent is logged, and the webhook stays off either way.
 */
export class Notifier {
  constructor(
    private readonly deps: {
      organizations: Client<typeof OrganizationService>;
      internalSecret: string;
      mailer: Mailer;
      logger: Logger;
    },
  ) {}

  async webhookStopped(webhook: StoppedWebhook): Promise<void> {
    try {
      const { members } = await this.deps.organizations.listMembers(
        { organizationId: webhook.organizationId },
        await callAs(this.deps.internalSecret, { kind: "service", service: "webhooks" }),
      );
      const to = members.filter(
        (member) => member.role === Role.OWNER || member.role === Role.ADMIN,
      );
      for (const member of to) {
        await this.deps.mailer.send({
          to: member.email,
          subject: "A Rowbase webhook was turned off after failed deliveries",
          text:
            `The webhook ${webhook.id} of table ${webhook.tableId} (${webhook.url}) was turned ` +
            "off: a delivery failed after its last retry, or 50 attempts in a row failed.\n\n" +
            "Its deliveries show the answers it got (GET /webhook/deliveries). Fix the " +
            "receiver, then switch the webhook on again (POST /webhook/update with " +
            '{"active": true}); it starts again from the changes made after that, and ' +
            "POST /webhook/redeliver sends a failed delivery again.\n",
        });
      }
    } catch (error) {
      this.deps.logger.warn(
        { err: error, webhookId: webhook.id.toString() },
        "could not mail the owner and admins about a stopped webhook",
      );
    }
  }
}
