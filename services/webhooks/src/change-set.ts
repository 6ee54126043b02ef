import { create } from "@bufbuild/protobuf";
import type { EntityManager } from "@mikro-orm/postgresql";
import {
  type AuditChange,
  auditChangesJson,
  ChangeSet as BaseChangeSet,
  Transactions as BaseTransactions,
  type CallContext,
  type Logger,
  type Orm,
  type OutboxRelay,
  SUBJECTS,
} from "@rowbase/kit";
import {
  AuditEvent_TargetSchema,
  AuditEventSchema,
} from "@rowbase/proto/rowbase/events/v1/audit_events_pb";
import type { WebhookRow } from "./db/webhook-row.js";

/** What one webhooks transaction changes besides its rows (kit `ChangeSet`): audit events. */
export class ChangeSet extends BaseChangeSet {
  /** An audit event `audit.webhook.<verb>` on the AUDIT stream; never with a secret. */
  async audit(
    webhook: Pick<WebhookRow, "id" | "organizationId" | "databaseId" | "tableId">,
    action: `webhook.${string}`,
    changes: AuditChange[] = [],
  ): Promise<void> {
    await this.publish(SUBJECTS.audit(action), AuditEventSchema, {
      organizationId: webhook.organizationId,
      databaseId: webhook.databaseId,
      tableId: webhook.tableId,
      action,
      target: create(AuditEvent_TargetSchema, { type: "webhook", id: webhook.id }),
      changesJson: auditChangesJson(changes),
    });
  }
}

export class Transactions extends BaseTransactions<ChangeSet> {
  constructor(orm: Orm, relay: Pick<OutboxRelay, "kick">, logger: Logger) {
    super(
      orm,
      relay,
      logger,
      (em: EntityManager, context: CallContext) => new ChangeSet(em, context),
    );
  }
}
