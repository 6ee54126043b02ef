import { randomUUID } from "node:crypto";
import { create, toBinary } from "@bufbuild/protobuf";
import { timestampNow } from "@bufbuild/protobuf/wkt";
import type { Client } from "@connectrpc/connect";
import {
  actorOf,
  type Cache,
  Code,
  domainError,
  type EventBus,
  type Logger,
  SUBJECTS,
} from "@rowbase/kit";
import { EventMetaSchema } from "@rowbase/proto/rowbase/events/v1/envelope_pb";
import { TransferCountedSchema } from "@rowbase/proto/rowbase/events/v1/usage_events_pb";
import type { PlanLimits } from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import type { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import type { ApiTokenCaller, SessionCaller } from "../auth/authenticate.js";
import type { ErrorCode } from "../errors/error-table.js";
import { monthlyCounter, takeBack, utcMonthOf } from "./api-call-counter.js";
import {
  addToCounter,
  MonthlyUsageRebuild,
  organizationMonthlyUsage,
} from "./monthly-usage-rebuild.js";
import { PlanAllowances } from "./plan-allowances.js";
import { localOnFailure } from "./unavailable-on-failure.js";

/**
 * The shared-cache key of an organization's file bytes moved in a UTC month (uploads, serves
 * and signed downloads), which every gateway replica counts into.
 */
export function transferCounterKey(organizationId: bigint, month: string): string {
  return `transfer:${organizationId}:${month}`;
}

/**
 * Reserves bytes of an organization's monthly transfer against its allowance, atomically: the
 * reservation whose increment passes the allowance takes it back and is refused, so parallel
 * transfers on every replica never pass it together. A month's counter is made by its first
 * reservation (`addToCounter`): with `rebuild`, from the month's bytes stored in Postgres.
 */
export class TransferCounter {
  constructor(
    private readonly cache: Cache,
    private readonly now: () => Date = () => new Date(),
    private readonly rebuild?: MonthlyUsageRebuild,
  ) {}

  /** The key the bytes were counted in (to give back into), or undefined when refused. */
  async reserve(
    organizationId: bigint,
    bytes: number,
    allowance: bigint,
    requestId?: string,
  ): Promise<string | undefined> {
    const counter = monthlyCounter(
      "transfer",
      transferCounterKey,
      organizationId,
      this.now(),
      requestId,
    );
    const total = await addToCounter(this.cache, counter, bytes, this.rebuild);
    if (BigInt(total) <= allowance) return counter.key;
    await takeBack(this.cache, counter.key, bytes);
    return undefined;
  }

  /** Gives back bytes reserved but not moved. */
  async release(key: string, bytes: number): Promise<void> {
    if (bytes <= 0) return;
    await takeBack(this.cache, key, bytes);
  }

  /** The bytes counted so far in the month of `now` (0 when none). */
  async used(organizationId: bigint): Promise<number> {
    const value = await this.cache.get(transferCounterKey(organizationId, utcMonthOf(this.now())));
    return value === null ? 0 : Number(value);
  }
}

/** Who a transfer is for, and how to log for its request. */
export interface TransferContext {
  /** Undefined for a signed-URL download, which has no caller. */
  caller: SessionCaller | ApiTokenCaller | undefined;
  requestId: string;
  log: Logger;
}

/**
 * A chunked upload (no length to reserve up front) reserves ahead in blocks of this many bytes,
 * so a large file costs few increments.
 */
export const RESERVATION_BLOCK_BYTES = 1024 * 1024;

/**
 * The transfer of one request: bytes are admitted (reserved against the allowance, or 403
 * `transfer_limit_exceeded`) before they move and counted as they move; `settle` gives back
 * what was reserved and did not move, and publishes what did as one TransferCounted event.
 */
export class TransferMeter {
  private key: string | undefined;
  private reserved = 0;
  private admitted = 0;
  private moved = 0;
  private settled = false;

  constructor(
    private readonly counter: TransferCounter,
    readonly organizationId: bigint,
    /** The plan the transfer is metered against (an upload's ceiling is its `max_file_bytes`). */
    readonly plan: PlanLimits,
    private readonly onSettled: (bytes: number) => void,
    private readonly log: Logger,
    private readonly requestId?: string,
  ) {}

  /**
   * Reserves `bytes` at once, all or nothing (403 `transfer_limit_exceeded`), for bytes admitted
   * later: a transfer whose length is known up front holds all of it or none, so parallel
   * transfers never each hold part of the room and all fail for want of the rest.
   */
  async reserve(bytes: number): Promise<void> {
    if (this.settled) throw new Error("transfer already settled");
    if (!(await this.take(bytes))) throw transferLimitExceeded();
  }

  /**
   * Lets `bytes` more move, reserving `ahead` bytes at once when the allowance has room for
   * them (fewer increments for a stream of small chunks) and only what is needed otherwise.
   */
  async admit(bytes: number, ahead = 0): Promise<void> {
    if (this.settled) throw new Error("transfer already settled");
    const missing = this.admitted + bytes - this.reserved;
    if (missing > 0 && !(ahead > missing && (await this.take(ahead)))) await this.reserve(missing);
    this.admitted += bytes;
  }

  private async take(bytes: number): Promise<boolean> {
    const key = await this.counter.reserve(
      this.organizationId,
      bytes,
      this.plan.transferBytesPerMonth,
      this.requestId,
    );
    if (!key) return false;
    this.key = key;
    this.reserved += bytes;
    return true;
  }

  /** Bytes that moved (within what was admitted). */
  count(bytes: number): void {
    this.moved = Math.min(this.admitted, this.moved + bytes);
  }

  /** Ends the transfer: what moved counts, the rest of the reservation is given back. */
  async settle(): Promise<void> {
    if (this.settled) return;
    this.settled = true;
    const unused = this.reserved - this.moved;
    if (this.key && unused > 0) {
      await this.counter
        .release(this.key, unused)
        .catch((error: unknown) =>
          this.log.warn(
            { err: error, organization_id: this.organizationId.toString(), bytes: unused },
            "transfer reservation not given back",
          ),
        );
    }
    if (this.moved > 0) this.onSettled(this.moved);
  }

  /** Ends a refused transfer (an upload that was not stored): nothing of it counts. */
  async cancel(): Promise<void> {
    this.moved = 0;
    await this.settle();
  }
}

export function transferLimitExceeded() {
  return domainError(Code.ResourceExhausted, "transfer_limit_exceeded");
}

export interface TransferQuotaParts {
  counter: TransferCounter;
  allowances: Pick<PlanAllowances, "limits">;
  /** Where TransferCounted goes (`usage.transfer`). */
  bus: EventBus;
}

/**
 * The bytes of file uploads, serves and signed-URL downloads count toward the
 * organization's `transfer_bytes_per_month` (UTC months), past which the transfer answers 403
 * `transfer_limit_exceeded`. The gateway is the one place that counts them: it is where the
 * bytes pass, and where a download's length is known before the first byte goes out.
 */
export class TransferQuota {
  constructor(private readonly parts: TransferQuotaParts) {}

  /** A meter for one transfer of the organization's files; `notFound` if it is gone. */
  async meter(
    organizationId: bigint,
    context: TransferContext,
    notFound: ErrorCode = "record_not_found",
  ): Promise<TransferMeter> {
    const plan = await this.parts.allowances.limits(organizationId, context.requestId, notFound);
    return new TransferMeter(
      this.parts.counter,
      organizationId,
      plan,
      (bytes) => this.publish(organizationId, bytes, context),
      context.log,
      context.requestId,
    );
  }

  /** Fire and forget: a failure is logged, the transfer it counts has happened anyway. */
  private publish(organizationId: bigint, bytes: number, context: TransferContext): void {
    const eventId = randomUUID();
    const event = create(TransferCountedSchema, {
      meta: create(EventMetaSchema, {
        eventId,
        occurredAt: timestampNow(),
        actor: actorOf(context.caller),
        requestId: context.requestId,
      }),
      organizationId,
      tokenId: context.caller?.kind === "api_token" ? context.caller.tokenId : 0n,
      transferBytes: BigInt(bytes),
    });
    const data = toBinary(TransferCountedSchema, event);
    Promise.resolve()
      .then(() => this.parts.bus.publish(SUBJECTS.transferCounted, data, eventId))
      .catch((error: unknown) =>
        context.log.warn(
          { err: error, organization_id: organizationId.toString(), event_id: eventId },
          "usage event not published",
        ),
      );
  }
}

export interface TransferQuotaDeps {
  /** The shared cache (Redis): transfer counters and plans. */
  cache: Cache;
  bus: EventBus;
  organization: Client<typeof OrganizationService>;
  internalSecret: string;
}

/**
 * The transfer quota as the gateway runs it. While the shared cache fails, it counts in this
 * replica's memory (rebuilt from Postgres, see `localOnFailure`): a per-replica cap, never a pass.
 */
export function createTransferQuota(deps: TransferQuotaDeps): TransferQuota {
  const cache = localOnFailure(deps.cache);
  return new TransferQuota({
    counter: new TransferCounter(
      cache,
      () => new Date(),
      new MonthlyUsageRebuild(
        cache,
        organizationMonthlyUsage(deps.organization, deps.internalSecret),
      ),
    ),
    allowances: new PlanAllowances(deps.organization, cache, deps.internalSecret),
    bus: deps.bus,
  });
}
