import { randomUUID } from "node:crypto";
import {
  type Authorizer,
  type Call,
  changesBetween,
  type JsonValue,
  type Permission,
  query,
  type ValidationItem,
  validationFailed,
  valuesRemoved,
  valuesSet,
} from "@rowbase/kit";
import type { Transactions } from "./change-set.js";
import {
  DELIVERY_COLUMNS,
  type DeliveryRow,
  type DeliveryStatus,
  deliveriesOf,
} from "./db/delivery-row.js";
import { WEBHOOK_COLUMNS, type WebhookRow, webhookById, webhooksOf } from "./db/webhook-row.js";
import { attemptDelivery } from "./delivery/attempt.js";
import type { AllowedTargets } from "./domain/address-policy.js";
import { newSecret, signedHeaders } from "./domain/signature.js";
import {
  descriptionOf,
  type EventType,
  eventsOf,
  isProblem,
  whereOf,
} from "./domain/webhook-input.js";
import { webhookUrlProblem } from "./domain/webhook-url.js";
import {
  deliveryNotFound,
  webhookLimitExceeded,
  webhookNotFound,
  webhookUrlForbidden,
} from "./errors.js";
import type { Upstream } from "./upstream.js";

/** How long the previous secret keeps signing after a rotation. */
export const PREVIOUS_SECRET_HOURS = 24;

export interface WebhookInput {
  url: string;
  events: readonly string[];
  where?: string | undefined;
  description: string;
  active?: boolean | undefined;
}

export interface WebhookPatch {
  url?: string | undefined;
  events?: readonly string[] | undefined;
  where?: string | undefined;
  description?: string | undefined;
  active?: boolean | undefined;
}

/** A webhook with the secret that a create or a rotation shows once. */
export interface WebhookWithSecret {
  webhook: WebhookRow;
  secret: string;
}

/** What the audit log shows of a webhook: never its secret. */
function audited(webhook: {
  url: string;
  events: EventType[];
  where: string | null;
  description: string;
  active: boolean;
}): Record<string, JsonValue> {
  return {
    url: webhook.url,
    events: webhook.events,
    where: webhook.where,
    description: webhook.description,
    active: webhook.active,
  };
}

function refuse(problems: ValidationItem[]): void {
  if (problems.length > 0) throw validationFailed(problems);
}

/**
 * Webhook definitions: their rules, authorization and audit. Managing needs the owner or admin
 * role in the table's organization, reading any member's; a webhook of an organization the
 * caller is not a member of is webhook_not_found.
 */
export class Webhooks {
  constructor(
    private readonly deps: {
      tx: Transactions;
      authorizer: Authorizer;
      upstream: Upstream;
      allowed: AllowedTargets;
      timeoutMs: number;
      /** New deliveries were queued (wakes the deliverer). */
      queued: () => void;
    },
  ) {}

  private checkUrl(url: string, problems: ValidationItem[]): void {
    const problem = webhookUrlProblem(url, this.deps.allowed);
    if (problem?.kind === "invalid")
      problems.push({
        key: "url",
        message: problem.message,
        source: "body",
        code: "invalid_value",
      });
    if (problem?.kind === "forbidden" && problems.length === 0) throw webhookUrlForbidden();
  }

  /** A webhook the caller may read or manage; another organization's is not found. */
  private async access(
    call: Call,
    webhook: WebhookRow | undefined,
    permission: Permission,
  ): Promise<WebhookRow> {
    if (!webhook) throw webhookNotFound();
    await this.deps.authorizer.authorize(
      call.principal,
      webhook.organizationId,
      permission,
      "webhook_not_found",
    );
    return webhook;
  }

  async create(call: Call, tableId: bigint, input: WebhookInput): Promise<WebhookWithSecret> {
    const problems: ValidationItem[] = [];
    const events = eventsOf(input.events);
    if (isProblem(events)) problems.push(events);
    const where = whereOf(input.where);
    if (isProblem(where)) problems.push(where);
    const description = descriptionOf(input.description);
    if (isProblem(description)) problems.push(description);
    refuse(problems);
    this.checkUrl(input.url, problems);
    refuse(problems);
    const filter = { events: events as EventType[], where: where as string | null };

    const home = await this.deps.upstream.tableHome(tableId, call.requestId);
    await this.deps.authorizer.authorize(
      call.principal,
      home.organizationId,
      "manage",
      "table_not_found",
    );
    const limits = await this.deps.upstream.planLimits(home.organizationId, call.requestId);
    // Checks `where` with records, and gives the cursor the webhook starts from: the present end.
    const cursor = await this.deps.upstream.presentEnd(tableId, filter, call.requestId);
    const secret = newSecret();
    const active = input.active ?? true;
    const webhook = await this.deps.tx.run(call, async (changes) => {
      const { em } = changes;
      // Creates of one organization take turns, so that parallel ones never overshoot the plan.
      await query(em, "select pg_advisory_xact_lock(hashtextextended($1, 0))", [
        `webhooks.organization:${home.organizationId}`,
      ]);
      const [count] = await query<{ n: string }>(
        em,
        "select count(*) as n from webhook where organization_id = $1",
        [home.organizationId],
      );
      if (BigInt(count!.n) >= limits.webhooks) throw webhookLimitExceeded();
      const [created] = await webhooksOf(
        em,
        `insert into webhook (organization_id, database_id, table_id, url, events, where_filter,
           description, active, secret, change_cursor)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
         returning ${WEBHOOK_COLUMNS}`,
        [
          home.organizationId,
          home.databaseId,
          tableId,
          input.url,
          filter.events,
          filter.where,
          description,
          active,
          secret,
          cursor,
        ],
      );
      await changes.audit(created!, "webhook.created", valuesSet(audited(created!)));
      return created!;
    });
    return { webhook, secret };
  }

  async get(call: Call, webhookId: bigint): Promise<WebhookRow> {
    return this.access(call, await webhookById(this.deps.tx.em(), webhookId), "read");
  }

  /** The table's webhooks, oldest first. */
  async list(call: Call, tableId: bigint): Promise<WebhookRow[]> {
    const home = await this.deps.upstream.tableHome(tableId, call.requestId);
    await this.deps.authorizer.authorize(
      call.principal,
      home.organizationId,
      "read",
      "table_not_found",
    );
    return webhooksOf(
      this.deps.tx.em(),
      `select ${WEBHOOK_COLUMNS} from webhook where table_id = $1 order by id`,
      [tableId],
    );
  }

  /**
   * Changes the given keys. Enabling a webhook that was off (by a member, or on its own after
   * failures or a 410) starts it again from the present end of its table's changes: the changes
   * made meanwhile are not sent.
   */
  async update(call: Call, webhookId: bigint, patch: WebhookPatch): Promise<WebhookRow> {
    const problems: ValidationItem[] = [];
    const events = patch.events === undefined ? undefined : eventsOf(patch.events);
    if (isProblem(events)) problems.push(events);
    const where = patch.where === undefined ? undefined : whereOf(patch.where);
    if (isProblem(where)) problems.push(where);
    const description =
      patch.description === undefined ? undefined : descriptionOf(patch.description);
    if (isProblem(description)) problems.push(description);
    refuse(problems);
    if (patch.url !== undefined) this.checkUrl(patch.url, problems);
    refuse(problems);

    const current = await this.access(
      call,
      await webhookById(this.deps.tx.em(), webhookId),
      "manage",
    );
    const next = {
      url: patch.url ?? current.url,
      events: (events as EventType[] | undefined) ?? current.events,
      where: where === undefined ? current.where : (where as string | null),
      description: (description as string | undefined) ?? current.description,
      active: patch.active ?? current.active,
    };
    const enabling = next.active && !current.active;
    const filterChanged = where !== undefined && where !== current.where && next.where !== null;
    const cursor =
      enabling || filterChanged
        ? await this.deps.upstream.presentEnd(current.tableId, next, call.requestId)
        : undefined;
    return this.deps.tx.run(call, async (changes) => {
      const { em } = changes;
      const locked = await this.access(call, await webhookById(em, webhookId, true), "manage");
      const changed = changesBetween(audited(locked), audited(next));
      if (changed.length === 0) return locked;
      const turnedOn = next.active && !locked.active;
      const [updated] = await webhooksOf(
        em,
        `update webhook set url = $2, events = $3, where_filter = $4, description = $5,
           active = $6,
           disabled_reason = case when $7::boolean then null else disabled_reason end,
           consecutive_failures = case when $7::boolean then 0 else consecutive_failures end,
           change_cursor = case when $7::boolean then $8 else change_cursor end,
           updated_at = now()
         where id = $1
         returning ${WEBHOOK_COLUMNS}`,
        [
          webhookId,
          next.url,
          next.events,
          next.where,
          next.description,
          next.active,
          turnedOn && cursor !== undefined,
          cursor ?? locked.changeCursor,
        ],
      );
      await changes.audit(updated!, "webhook.updated", changed);
      return updated!;
    });
  }

  /**
   * Deletes the webhook and its deliveries, the deliveries first: a delivery's outcome takes
   * its delivery row and then its webhook's, and a delete taking them the other way round (the
   * webhook's row, then its deliveries through the foreign key's cascade) would deadlock with
   * any outcome written meanwhile.
   */
  async delete(call: Call, webhookId: bigint): Promise<void> {
    await this.deps.tx.run(call, async (changes) => {
      const { em } = changes;
      const webhook = await this.access(call, await webhookById(em, webhookId), "manage");
      await query(em, "delete from delivery where webhook_id = $1", [webhookId]);
      const deleted = await query(em, "delete from webhook where id = $1 returning id", [
        webhookId,
      ]);
      // Deleted by another call since it was read.
      if (deleted.length === 0) throw webhookNotFound();
      await changes.audit(webhook, "webhook.deleted", valuesRemoved(audited(webhook)));
    });
  }

  /** A new secret; the previous one keeps signing for PREVIOUS_SECRET_HOURS. */
  async rotateSecret(call: Call, webhookId: bigint): Promise<WebhookWithSecret> {
    const secret = newSecret();
    const webhook = await this.deps.tx.run(call, async (changes) => {
      const { em } = changes;
      await this.access(call, await webhookById(em, webhookId, true), "manage");
      const [rotated] = await webhooksOf(
        em,
        `update webhook set previous_secret = secret, secret = $2,
           previous_secret_expires_at = now() + make_interval(hours => $3), updated_at = now()
         where id = $1
         returning ${WEBHOOK_COLUMNS}`,
        [webhookId, secret, PREVIOUS_SECRET_HOURS],
      );
      await changes.audit(rotated!, "webhook.secret_rotated");
      return rotated!;
    });
    return { webhook, secret };
  }

  /**
   * Sends a `webhook.test` event once, before answering, and never again; its delivery is in
   * the log like any other. It changes nothing of the webhook (its failures count, its state).
   */
  async test(call: Call, webhookId: bigint): Promise<DeliveryRow> {
    const em = this.deps.tx.em();
    const webhook = await this.access(call, await webhookById(em, webhookId), "manage");
    const messageId = `msg_test_${randomUUID()}`;
    const body = JSON.stringify({
      type: "webhook.test",
      webhook_id: Number(webhook.id),
      at: new Date().toISOString(),
    });
    const outcome = await attemptDelivery({
      url: webhook.url,
      body,
      headers: signedHeaders(webhook.secrets, messageId, Math.floor(Date.now() / 1000), body),
      allowed: this.deps.allowed,
      timeoutMs: this.deps.timeoutMs,
    });
    const succeeded = outcome.status !== undefined && outcome.status >= 200 && outcome.status < 300;
    const [delivery] = await deliveriesOf(
      em,
      `insert into delivery (webhook_id, message_id, event, payload, status, attempts,
         response_status, error, duration_ms, finished_at)
       values ($1, $2, 'webhook.test', $3, $4, 1, $5, $6, $7, now())
       returning ${DELIVERY_COLUMNS}`,
      [
        webhookId,
        messageId,
        body,
        succeeded ? "succeeded" : "failed",
        outcome.status ?? null,
        outcome.error ?? null,
        outcome.durationMs,
      ],
    );
    return delivery!;
  }

  /** A webhook's deliveries, newest first, with their total. */
  async deliveries(
    call: Call,
    webhookId: bigint,
    page: { limit: number; offset: number; status: DeliveryStatus | undefined },
  ): Promise<{ deliveries: DeliveryRow[]; total: number }> {
    const problems: ValidationItem[] = [];
    const limit = page.limit === 0 ? 20 : page.limit;
    if (limit < 1 || limit > 100) {
      problems.push({
        key: "limit",
        message: "must be 1-100",
        source: "query",
        code: "out_of_range",
      });
    }
    if (page.offset < 0) {
      problems.push({
        key: "offset",
        message: "must be 0 or more",
        source: "query",
        code: "out_of_range",
      });
    }
    refuse(problems);
    const em = this.deps.tx.em();
    await this.access(call, await webhookById(em, webhookId), "read");
    const status = page.status ?? null;
    const deliveries = await deliveriesOf(
      em,
      `select ${DELIVERY_COLUMNS} from delivery
       where webhook_id = $1 and ($2::text is null or status = $2)
       order by id desc limit $3 offset $4`,
      [webhookId, status, limit, page.offset],
    );
    const [count] = await query<{ n: string }>(
      em,
      "select count(*) as n from delivery where webhook_id = $1 and ($2::text is null or status = $2)",
      [webhookId, status],
    );
    return { deliveries, total: Number(count!.n) };
  }

  /**
   * A new delivery of a delivery's change (or test event): the same body and `webhook-id`,
   * queued now, after the pending deliveries of the same record.
   */
  async redeliver(call: Call, deliveryId: bigint): Promise<DeliveryRow> {
    const em = this.deps.tx.em();
    const [found] = await query<{ webhook_id: string }>(
      em,
      "select webhook_id from delivery where id = $1",
      [deliveryId],
    );
    const webhook = found ? await webhookById(em, BigInt(found.webhook_id)) : undefined;
    if (!webhook) throw deliveryNotFound();
    await this.deps.authorizer.authorize(
      call.principal,
      webhook.organizationId,
      "manage",
      "delivery_not_found",
    );
    const [delivery] = await deliveriesOf(
      em,
      `insert into delivery (webhook_id, message_id, change_id, event, row_id, payload,
         next_attempt_at)
       select webhook_id, message_id, change_id, event, row_id, payload, now()
       from delivery where id = $1
       returning ${DELIVERY_COLUMNS}`,
      [deliveryId],
    );
    if (!delivery) throw deliveryNotFound();
    this.deps.queued();
    return delivery;
  }
}
