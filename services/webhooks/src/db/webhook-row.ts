import type { EntityManager } from "@mikro-orm/postgresql";
import { query } from "@rowbase/kit";
import type { EventType } from "../domain/webhook-input.js";

/** Why a webhook stopped on its own. */
export type DisabledReason = "failures" | "gone";

/** A row of `webhook`, as the service works with it. */
export interface WebhookRow {
  id: bigint;
  organizationId: bigint;
  databaseId: bigint;
  tableId: bigint;
  url: string;
  events: EventType[];
  where: string | null;
  description: string;
  active: boolean;
  disabledReason: DisabledReason | null;
  consecutiveFailures: number;
  lastDeliveryAt: Date | null;
  /** The secrets that sign now: the current one, and the previous one during a rotation. */
  secrets: string[];
  changeCursor: string;
  createdAt: Date;
  updatedAt: Date;
}

export const WEBHOOK_COLUMNS = `id, organization_id, database_id, table_id, url, events, where_filter,
  description, active, disabled_reason, consecutive_failures, last_delivery_at, secret,
  case when previous_secret_expires_at > now() then previous_secret end as previous_secret,
  change_cursor, created_at, updated_at`;

interface Stored {
  id: string;
  organization_id: string;
  database_id: string;
  table_id: string;
  url: string;
  events: EventType[];
  where_filter: string | null;
  description: string;
  active: boolean;
  disabled_reason: DisabledReason | null;
  consecutive_failures: number;
  last_delivery_at: Date | string | null;
  secret: string;
  previous_secret: string | null;
  change_cursor: string;
  created_at: Date | string;
  updated_at: Date | string;
}

/** A timestamptz as the driver returns it (`2026-11-21 10:15:00.123456+00`, or a Date). */
export function timestampOf(value: Date | string): Date {
  if (value instanceof Date) return value;
  const date = new Date(value.replace(" ", "T").replace(/([+-]\d\d)$/, "$1:00"));
  if (Number.isNaN(date.getTime())) throw new Error(`unreadable timestamp ${value}`);
  return date;
}

export function webhookOf(row: Stored): WebhookRow {
  return {
    id: BigInt(row.id),
    organizationId: BigInt(row.organization_id),
    databaseId: BigInt(row.database_id),
    tableId: BigInt(row.table_id),
    url: row.url,
    events: row.events,
    where: row.where_filter,
    description: row.description,
    active: row.active,
    disabledReason: row.disabled_reason,
    consecutiveFailures: Number(row.consecutive_failures),
    lastDeliveryAt: row.last_delivery_at ? timestampOf(row.last_delivery_at) : null,
    secrets: row.previous_secret ? [row.secret, row.previous_secret] : [row.secret],
    changeCursor: row.change_cursor,
    createdAt: timestampOf(row.created_at),
    updatedAt: timestampOf(row.updated_at),
  };
}

/** Runs a statement `... returning WEBHOOK_COLUMNS` (or a select of them) and maps its rows. */
export async function webhooksOf(
  em: EntityManager,
  sql: string,
  params: readonly unknown[],
): Promise<WebhookRow[]> {
  return (await query<Stored>(em, sql, params)).map(webhookOf);
}

/** One webhook by id, locked for update when `lock` (inside a transaction). */
export async function webhookById(
  em: EntityManager,
  id: bigint,
  lock = false,
): Promise<WebhookRow | undefined> {
  const [row] = await webhooksOf(
    em,
    `select ${WEBHOOK_COLUMNS} from webhook where id = $1 ${lock ? "for update" : ""}`,
    [id],
  );
  return row;
}
