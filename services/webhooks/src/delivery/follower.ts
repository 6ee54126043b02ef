import {
  changeJson,
  changeTypeName,
  errorInfoOf,
  type Logger,
  type Orm,
  query,
  VALIDATION_REASON,
} from "@rowbase/kit";
import type { ListChangesResponse } from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import type { EventType } from "../domain/webhook-input.js";
import type { Upstream } from "../upstream.js";

/** Changes asked for at once, and pages read for one group of webhooks in one round. */
const PAGE_SIZE = 200;
const PAGES_PER_ROUND = 10;
/** Groups of webhooks followed at once. */
const CONCURRENCY = 4;

/** A page of changes as the deliveries of every webhook of a group take it, presented once. */
interface Page {
  next: string;
  changeIds: string[];
  events: string[];
  rowIds: bigint[];
  bodies: string[];
}

interface Followed {
  id: bigint;
  tableId: bigint;
  events: EventType[];
  where: string | null;
  cursor: string;
}

/** The `webhook-id` of a change's deliveries to one webhook: the same on every attempt. */
export function messageIdOf(webhookId: bigint, changeId: string): string {
  return `msg_${webhookId}_${changeId}`;
}

/**
 * The webhooks that read the same pages: of one table, with the same events and `where`, at
 * the same cursor (every webhook that has caught up with its table, and any that started
 * together).
 */
function groupKey(webhook: Followed): string {
  return JSON.stringify([
    webhook.tableId.toString(),
    webhook.events,
    webhook.where,
    webhook.cursor,
  ]);
}

/**
 * Follows the change logs of the tables of active webhooks through records' ListChanges (the
 * same cursors as the feed), filtered by each webhook's events and `where`. The webhooks that
 * would read the same page (`groupKey`) read it once, and each queues it on its own: the webhooks
 * of a table that share a filter cost one ListChanges a round, not one each, while they keep
 * up. A page of changes
 * becomes pending deliveries in the transaction that moves the webhook's cursor past them, and
 * only if the cursor is still where the page was read from: a change is queued once, whichever
 * replica read it, and a crash before the commit leaves the cursor where it was, to be read
 * again. Records being away only delays the next page; NATS is not involved.
 */
export class Follower {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly deps: {
      orm: Orm;
      upstream: Upstream;
      logger: Logger;
      pollMs: number;
      /** Called when deliveries were queued (wakes the deliverer). */
      queued: () => void;
      /** A webhook whose filter records no longer takes (a field it names was deleted). */
      broken: (webhookId: bigint) => Promise<void>;
    },
  ) {}

  start(): void {
    const tick = () => {
      if (this.stopped) return;
      this.running = this.round()
        .catch((error: unknown) => this.deps.logger.warn({ err: error }, "webhook follow failed"))
        .finally(() => {
          this.running = undefined;
          if (!this.stopped) this.timer = setTimeout(tick, this.deps.pollMs);
        });
    };
    this.timer = setTimeout(tick, 0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** One pass over every active webhook. */
  async round(): Promise<void> {
    const rows = await query<{
      id: string;
      table_id: string;
      events: EventType[];
      where_filter: string | null;
      change_cursor: string;
    }>(
      this.deps.orm.em.fork(),
      "select id, table_id, events, where_filter, change_cursor from webhook where active order by id",
    );
    const groups = new Map<string, Followed[]>();
    for (const row of rows) {
      const webhook: Followed = {
        id: BigInt(row.id),
        tableId: BigInt(row.table_id),
        events: row.events,
        where: row.where_filter,
        cursor: row.change_cursor,
      };
      const key = groupKey(webhook);
      groups.set(key, [...(groups.get(key) ?? []), webhook]);
    }
    const followed = [...groups.values()];
    let next = 0;
    const worker = async () => {
      while (!this.stopped && next < followed.length) {
        const group = followed[next++]!;
        await this.follow(group).catch((error: unknown) =>
          this.deps.logger.warn(
            { err: error, webhookIds: group.map((webhook) => webhook.id.toString()) },
            "webhook follow failed",
          ),
        );
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  }

  /**
   * Reads a group's pages once and queues each page for every webhook of the group; a webhook
   * whose cursor another replica moved meanwhile leaves the group (it is regrouped next round).
   */
  private async follow(group: Followed[]): Promise<void> {
    const { tableId, events, where } = group[0]!;
    let members = group;
    let cursor = group[0]!.cursor;
    for (let pages = 0; pages < PAGES_PER_ROUND && !this.stopped; pages++) {
      let page: ListChangesResponse;
      try {
        page = await this.deps.upstream.changes(tableId, cursor, { events, where }, PAGE_SIZE);
      } catch (error) {
        for (const webhook of members) {
          await this.refused(webhook, error).catch((failure: unknown) =>
            this.deps.logger.warn(
              { err: failure, webhookId: webhook.id.toString() },
              "webhook follow failed",
            ),
          );
        }
        return;
      }
      if (page.changes.length === 0 && page.next === cursor) return;
      const read: Page = {
        next: page.next,
        changeIds: page.changes.map((change) => change.changeId),
        events: page.changes.map(changeTypeName),
        rowIds: page.changes.map((change) => change.rowId),
        bodies: page.changes.map(changeJson),
      };
      const queued: Followed[] = [];
      for (const webhook of members) {
        if (await this.queue(webhook, read)) queued.push(webhook);
      }
      members = queued;
      if (members.length === 0) return;
      cursor = page.next;
      for (const webhook of members) webhook.cursor = cursor;
      if (page.changes.length > 0) this.deps.queued();
      if (!page.hasMore) return;
    }
  }

  /** Queues a page's deliveries and moves the cursor, in one transaction; false if it moved. */
  private async queue(webhook: Followed, page: Page): Promise<boolean> {
    return this.deps.orm.em.fork().transactional(async (em) => {
      const moved = await query(
        em,
        `update webhook set change_cursor = $2
         where id = $1 and change_cursor = $3 and active returning id`,
        [webhook.id, page.next, webhook.cursor],
      );
      if (moved.length === 0) return false;
      if (page.changeIds.length === 0) return true;
      await query(
        em,
        `insert into delivery (webhook_id, message_id, change_id, event, row_id, payload,
           next_attempt_at)
         select $1, c.message_id, c.change_id, c.event, c.row_id, c.payload, now()
         from unnest($2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[])
           with ordinality as c(message_id, change_id, event, row_id, payload, n)
         order by c.n`,
        [
          webhook.id,
          page.changeIds.map((changeId) => messageIdOf(webhook.id, changeId)),
          page.changeIds,
          page.events,
          page.rowIds,
          page.bodies,
        ],
      );
      return true;
    });
  }

  /**
   * A page records refused. An expired cursor (the webhook's service was away longer than the
   * retention) moves to the present end: those changes are gone for every reader. A table that
   * no longer exists takes its webhooks with it. A filter records no longer takes stops the
   * webhook. Anything else (records away) is tried again next round.
   */
  private async refused(webhook: Followed, error: unknown): Promise<void> {
    const reason = errorInfoOf(error)?.reason;
    const em = this.deps.orm.em.fork();
    const id = webhook.id.toString();
    if (reason === "cursor_expired") {
      const { next } = await this.deps.upstream.changes(webhook.tableId, "now", webhook, 1);
      await query(
        em,
        "update webhook set change_cursor = $2 where id = $1 and change_cursor = $3",
        [webhook.id, next, webhook.cursor],
      );
      this.deps.logger.warn({ webhookId: id }, "a webhook's cursor expired: it goes on from now");
    } else if (reason === "table_not_found") {
      await query(em, "delete from webhook where id = $1 and table_id = $2", [
        webhook.id,
        webhook.tableId,
      ]);
      this.deps.logger.info({ webhookId: id }, "the table of a webhook is gone: deleted it");
    } else if (reason === VALIDATION_REASON) {
      this.deps.logger.warn({ webhookId: id }, "records no longer takes a webhook's filter");
      await this.deps.broken(webhook.id);
    } else {
      this.deps.logger.warn({ err: error, webhookId: id }, "could not read a webhook's changes");
    }
  }
}
