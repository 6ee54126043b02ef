import { fromBinary } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { type EntityManager, IsolationLevel } from "@mikro-orm/postgresql";
import {
  type BusMessage,
  Code,
  domainError,
  type Logger,
  SUBJECTS,
  validationFailed,
} from "@rowbase/kit";
import {
  ApiCallsCountedSchema,
  TransferCountedSchema,
} from "@rowbase/proto/rowbase/events/v1/usage_events_pb";
import { authorize } from "./access.js";
import type { Transactions, UserCall } from "./change-set.js";
import { Organization } from "./db/entities.js";
import { firstOfMonth, usagePeriodOf, utcDay } from "./domain/usage-period.js";

/** Use over a period of whole UTC days: totals, every day (zeros included), every token. */
export interface ApiStatsView {
  from: string;
  to: string;
  apiCalls: bigint;
  transferBytes: bigint;
  days: { date: string; apiCalls: bigint; transferBytes: bigint }[];
  /** Tokens that made calls in the period, most calls first; session calls are not listed. */
  tokens: { tokenId: bigint; name: string; apiCalls: bigint }[];
}

export interface MonthlyUsage {
  apiCalls: bigint;
  transferBytes: bigint;
}

/** A counted amount for one organization, UTC day and token (0: a member's session). */
interface Counted {
  organizationId: bigint;
  tokenId: bigint;
  day: string;
  apiCalls: bigint;
  transferBytes: bigint;
}

/**
 * This UTC month's API calls and transfer of an organization, summed from the daily rows. The
 * one source for GetLimits' usage and GetMonthlyUsage.
 */
export async function monthlyUsage(
  em: EntityManager,
  organizationId: bigint,
  now = new Date(),
): Promise<MonthlyUsage> {
  const [row] = await em.execute<{ api_calls: string | null; transfer_bytes: string | null }[]>(
    `select sum(api_calls) as api_calls, sum(transfer_bytes) as transfer_bytes
     from usage_daily where organization_id = ? and day >= ?::date`,
    [organizationId, firstOfMonth(utcDay(now))],
  );
  return {
    apiCalls: BigInt(row?.api_calls ?? 0),
    transferBytes: BigInt(row?.transfer_bytes ?? 0),
  };
}

/**
 * Usage statistics (`/organization/api_stats`): the gateway counts record-route calls and file
 * transfer and publishes them on the USAGE stream; this adds them up per organization and UTC
 * day of the event (and per API token) in Postgres, so the numbers survive Redis and answer
 * any period.
 */
export class UsageStats {
  constructor(private readonly deps: { tx: Transactions; logger: Logger }) {}

  /**
   * Adds one USAGE message unless `consumer` already did, in one statement (its id claimed in
   * `processed_event` and both sums added, atomically: see `consumeClaimed`). Counts for an
   * organization that no longer exists are dropped (its rows went with it); unknown usage
   * subjects are ignored. The organization's row is locked `for key share`, the lock the
   * foreign keys of the daily rows take: a deletion that is under way is waited for and its
   * organization then found gone (the counts dropped), rather than seen in the statement's
   * snapshot and refused by the foreign key once the deletion commits; a deletion that comes
   * after waits for the counts, and its cascade takes them.
   */
  async apply(
    em: EntityManager,
    consumer: string,
    message: BusMessage,
    now = new Date(),
  ): Promise<void> {
    const counted = this.countedOf(message, now);
    if (!counted) return;
    await em.execute(
      `with claimed as (
         insert into processed_event (consumer, event_id) values (?, ?)
         on conflict (consumer, event_id) do nothing returning event_id
       ), owner as (
         select id from organizations where id = ? and exists (select 1 from claimed)
         for key share
       ), daily as (
         insert into usage_daily (organization_id, day, api_calls, transfer_bytes)
         select id, ?::date, ?, ? from owner
         on conflict (organization_id, day) do update set
           api_calls = usage_daily.api_calls + excluded.api_calls,
           transfer_bytes = usage_daily.transfer_bytes + excluded.transfer_bytes
         returning 1
       ), by_token as (
         insert into usage_daily_token (organization_id, day, token_id, api_calls, transfer_bytes)
         select id, ?::date, ?, ?, ? from owner where ?::bigint <> 0
         on conflict (organization_id, day, token_id) do update set
           api_calls = usage_daily_token.api_calls + excluded.api_calls,
           transfer_bytes = usage_daily_token.transfer_bytes + excluded.transfer_bytes
         returning 1
       )
       select count(*) as claimed from claimed`,
      [
        consumer,
        message.id,
        counted.organizationId,
        counted.day,
        counted.apiCalls,
        counted.transferBytes,
        counted.day,
        counted.tokenId,
        counted.apiCalls,
        counted.transferBytes,
        counted.tokenId,
      ],
    );
  }

  /** What a USAGE message counts; undefined for nothing to add. */
  private countedOf(message: BusMessage, now: Date): Counted | undefined {
    let counted: Counted;
    if (message.subject === SUBJECTS.apiCallsCounted) {
      const event = fromBinary(ApiCallsCountedSchema, message.data);
      counted = {
        organizationId: event.organizationId,
        tokenId: event.tokenId,
        day: utcDay(event.meta?.occurredAt ? timestampDate(event.meta.occurredAt) : now),
        apiCalls: event.apiCalls,
        transferBytes: 0n,
      };
    } else if (message.subject === SUBJECTS.transferCounted) {
      const event = fromBinary(TransferCountedSchema, message.data);
      counted = {
        organizationId: event.organizationId,
        tokenId: event.tokenId,
        day: utcDay(event.meta?.occurredAt ? timestampDate(event.meta.occurredAt) : now),
        apiCalls: 0n,
        transferBytes: event.transferBytes,
      };
    } else {
      this.deps.logger.debug({ subject: message.subject }, "usage event ignored");
      return undefined;
    }
    if (counted.apiCalls < 0n || counted.transferBytes < 0n) {
      this.deps.logger.warn({ subject: message.subject, id: message.id }, "negative usage ignored");
      return undefined;
    }
    if (counted.apiCalls === 0n && counted.transferBytes === 0n) return undefined;
    return counted;
  }

  /** api_stats for a member: the period defaults to this month so far. */
  async stats(
    call: UserCall,
    organizationId: bigint,
    fromText: string,
    toText: string,
    now = new Date(),
  ): Promise<ApiStatsView> {
    const period = usagePeriodOf(fromText, toText, now);
    if ("problems" in period) throw validationFailed(period.problems);
    const em = this.deps.tx.em();
    await authorize(em, organizationId, call.userId, "read", "organization_not_found");
    // Both reads see one snapshot: read apart, calls counted between them showed in the tokens
    // but not in the totals.
    const { daily, tokens } = await em.transactional(
      async (tx) => ({
        daily: await tx.execute<{ day: string; api_calls: string; transfer_bytes: string }[]>(
          `select to_char(day, 'YYYY-MM-DD') as day, api_calls, transfer_bytes from usage_daily
           where organization_id = ? and day between ?::date and ?::date`,
          [organizationId, period.from, period.to],
        ),
        tokens: await tx.execute<{ token_id: string; name: string; api_calls: string }[]>(
          `select u.token_id, coalesce(t.name, '') as name, sum(u.api_calls) as api_calls
           from usage_daily_token u
           left join api_tokens t on t.id = u.token_id and t.organization_id = u.organization_id
           where u.organization_id = ? and u.day between ?::date and ?::date
           group by u.token_id, t.name
           having sum(u.api_calls) > 0
           order by sum(u.api_calls) desc, u.token_id`,
          [organizationId, period.from, period.to],
        ),
      }),
      { isolationLevel: IsolationLevel.REPEATABLE_READ, readOnly: true },
    );
    const byDay = new Map(daily.map((row) => [row.day, row]));
    const days = period.days.map((date) => ({
      date,
      apiCalls: BigInt(byDay.get(date)?.api_calls ?? 0),
      transferBytes: BigInt(byDay.get(date)?.transfer_bytes ?? 0),
    }));
    return {
      from: period.from,
      to: period.to,
      apiCalls: days.reduce((sum, day) => sum + day.apiCalls, 0n),
      transferBytes: days.reduce((sum, day) => sum + day.transferBytes, 0n),
      days,
      tokens: tokens.map((row) => ({
        tokenId: BigInt(row.token_id),
        name: row.name,
        apiCalls: BigInt(row.api_calls),
      })),
    };
  }

  /**
   * Internal (GetMonthlyUsage): this month's totals, for the gateway to rebuild the Redis
   * counters it lost. An unknown organization is organization_not_found, as in GetPlan.
   */
  async monthly(organizationId: bigint, now = new Date()): Promise<MonthlyUsage> {
    const em = this.deps.tx.em();
    if (!(await em.findOne(Organization, { id: organizationId }))) {
      throw domainError(Code.NotFound, "organization_not_found");
    }
    return monthlyUsage(em, organizationId, now);
  }
}
