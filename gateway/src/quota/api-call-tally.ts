import { randomUUID } from "node:crypto";
import { create, toBinary } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { actorOf, type EventBus, type Logger, SUBJECTS } from "@rowbase/kit";
import { type Actor, EventMetaSchema } from "@rowbase/proto/rowbase/events/v1/envelope_pb";
import { ApiCallsCountedSchema } from "@rowbase/proto/rowbase/events/v1/usage_events_pb";
import type { ApiTokenCaller, SessionCaller } from "../auth/authenticate.js";

/** Events kept for another try while the bus fails; past this the oldest are dropped. */
const MAX_UNSENT = 10_000;

interface Sum {
  organizationId: bigint;
  tokenId: bigint;
  actor: Actor;
  /** The first call of the sum: the event's time, so its UTC day is the calls' day. */
  firstAt: Date;
  calls: bigint;
}

interface Unsent {
  id: string;
  data: Uint8Array;
}

/**
 * Adds up the API calls this gateway replica counted, per organization, caller (an API token,
 * or a member's session: token 0 and the user as actor) and UTC day, and publishes each sum as
 * one ApiCallsCounted event per flush interval (`USAGE_FLUSH_MS`, 1 s by default): one event
 * per busy caller and second instead of one per call. The organization service turns them into
 * `api_stats`, which therefore lags by up to the interval. The monthly allowance is not
 * affected: it is counted in the shared cache, per call, before the call is answered.
 *
 * An event the bus refused is published again, with the same id (so JetStream drops it if the
 * first try did land), with the next flush. A replica that dies loses at most its last
 * interval of statistics; `close` publishes what is left. With an interval of 0 the calls are
 * published right after the turn of the event loop that counted them (summed within it).
 */
export class ApiCallTally {
  private sums = new Map<string, Sum>();
  private unsent: Unsent[] = [];
  private flushing: Promise<void> = Promise.resolve();
  private readonly timer: NodeJS.Timeout | undefined;
  private scheduled = false;

  constructor(
    private readonly bus: EventBus,
    private readonly logger: Logger,
    private readonly intervalMs: number,
    private readonly now: () => Date = () => new Date(),
  ) {
    if (intervalMs > 0) {
      this.timer = setInterval(() => void this.flush(), intervalMs);
      this.timer.unref();
    }
  }

  /** Counts one call of `caller` charged to `organizationId`. */
  add(caller: SessionCaller | ApiTokenCaller, organizationId: bigint): void {
    const now = this.now();
    const tokenId = caller.kind === "api_token" ? caller.tokenId : 0n;
    const actor = actorOf(caller);
    const key = `${organizationId}:${actor.type}:${actor.id}:${now.toISOString().slice(0, 10)}`;
    const sum = this.sums.get(key);
    if (sum) sum.calls += 1n;
    else this.sums.set(key, { organizationId, tokenId, actor, firstAt: now, calls: 1n });
    if (this.intervalMs === 0 && !this.scheduled) {
      this.scheduled = true;
      setImmediate(() => {
        this.scheduled = false;
        void this.flush();
      });
    }
  }

  /** Publishes what was counted since the last flush (and what failed to go then). */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(() => this.publishAll());
    return this.flushing;
  }

  /** Stops the timer and publishes what is left. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }

  private async publishAll(): Promise<void> {
    const events = [...this.unsent, ...[...this.sums.values()].map((sum) => this.eventOf(sum))];
    this.sums = new Map();
    this.unsent = [];
    if (events.length === 0) return;
    const results = await Promise.allSettled(
      events.map((event) => this.bus.publish(SUBJECTS.apiCallsCounted, event.data, event.id)),
    );
    const failed = events.filter((_, i) => results[i]?.status === "rejected");
    if (failed.length === 0) return;
    const dropped = Math.max(0, failed.length - MAX_UNSENT);
    this.unsent = failed.slice(dropped);
    const reason = results.find((r) => r.status === "rejected")?.reason;
    this.logger.warn(
      { err: reason, unsent: this.unsent.length, dropped },
      "usage events not published; trying again with the next flush",
    );
  }

  private eventOf(sum: Sum): Unsent {
    const id = randomUUID();
    const event = create(ApiCallsCountedSchema, {
      meta: create(EventMetaSchema, {
        eventId: id,
        occurredAt: timestampFromDate(sum.firstAt),
        actor: sum.actor,
      }),
      organizationId: sum.organizationId,
      tokenId: sum.tokenId,
      apiCalls: sum.calls,
    });
    return { id, data: toBinary(ApiCallsCountedSchema, event) };
  }
}
