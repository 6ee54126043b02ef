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
import { WEBHOOK_COLUMNS, type WebhookRow, webhookById, webhooksOf } from "./db/webhook-row.js";
import type { AllowedTargets } from "./domain/address-policy.js";
import { newSecret } from "./domain/signature.js";
import {
  descriptionOf,
  type EventType,
  eventsOf,
  isProblem,
  whereOf,
} from "./domain/webhook-input.js";
import { webhookUrlProblem } from "./domain/webhook-url.js";
import { webhookLimitExceeded, webhookNotFound, webhookUrlForbidden } from "./errors.js";
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
    },
  ) {}

  private checkUrl(url: string, problems: ValidationItem[]): void {
    const problem = webhookUrlProblem(url, this.deps.allowed);
    if (problem?.kind === "invalid")
      problems.push({ key: "url", message: problem.message, source: "body" });
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

  async delete(call: Call, webhookId: bigint): Promise<void> {
    await this.deps.tx.run(call, async (changes) => {
      const { em } = changes;
      const webhook = await this.access(call, await webhookById(em, webhookId, true), "manage");
      await query(em, "delete from webhook where id = $1", [webhookId]);
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
}
