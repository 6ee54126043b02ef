import type { EntityManager } from "@mikro-orm/postgresql";
import { query } from "@rowbase/kit";
import { timestampOf } from "./webhook-row.js";

export type DeliveryStatus = "pending" | "succeeded" | "failed";

/** A row of `delivery`, as the API shows it. */
export interface DeliveryRow {
  id: bigint;
  webhookId: bigint;
  changeId: string | null;
  event: string;
  status: DeliveryStatus;
  attempts: number;
  responseStatus: number | null;
  error: string | null;
  durationMs: number | null;
  createdAt: Date;
  nextAttemptAt: Date | null;
}

export const DELIVERY_COLUMNS = `id, webhook_id, change_id, event, status, attempts,
  response_status, error, duration_ms, created_at, next_attempt_at`;

interface Stored {
  id: string;
  webhook_id: string;
  change_id: string | null;
  event: string;
  status: DeliveryStatus;
  attempts: number;
  response_status: number | null;
  error: string | null;
  duration_ms: number | null;
  created_at: Date | string;
  next_attempt_at: Date | string | null;
}

export function deliveryOf(row: Stored): DeliveryRow {
  return {
    id: BigInt(row.id),
    webhookId: BigInt(row.webhook_id),
    changeId: row.change_id,
    event: row.event,
    status: row.status,
    attempts: Number(row.attempts),
    responseStatus: row.response_status === null ? null : Number(row.response_status),
    error: row.error,
    durationMs: row.duration_ms === null ? null : Number(row.duration_ms),
    createdAt: timestampOf(row.created_at),
    nextAttemptAt: row.next_attempt_at === null ? null : timestampOf(row.next_attempt_at),
  };
}

/** Runs a statement returning DELIVERY_COLUMNS and maps its rows. */
export async function deliveriesOf(
  em: EntityManager,
  sql: string,
  params: readonly unknown[],
): Promise<DeliveryRow[]> {
  return (await query<Stored>(em, sql, params)).map(deliveryOf);
}
