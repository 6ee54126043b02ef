import { PassThrough } from "node:stream";
import type { CallOptions } from "@connectrpc/connect";
import {
  type Cache,
  Code,
  changeJson,
  changeTypeName,
  domainError,
  errorInfoOf,
  type Logger,
} from "@rowbase/kit";
import type { ListChangesResponse } from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import { RETRY_AFTER_METADATA } from "../../errors/error-table.js";
import type { GatewayContext } from "../../gateway-context.js";

/** How often an open stream asks for new changes, and how often it sends a comment. */
export interface ChangeStreamTiming {
  pollMs: number;
  heartbeatMs: number;
}

/** One page of a table's changes after `after` (a cursor or `now`), for the caller's request. */
export type ChangePages = (after: string, call: CallOptions) => Promise<ListChangesResponse>;

/**
 * The open change streams of this gateway, and the plan's `change_streams` cap on them per
 * organization across every replica: a stream holds one of the organization's numbered slots in
 * the shared cache (`SET NX`) while it is open, renewed with every heartbeat and given back when
 * it ends; a replica that dies leaves its slots to expire. On shutdown every stream ends
 * cleanly, so that its client reconnects (to another replica) with `Last-Event-ID`.
 */
export class ChangeStreams {
  private readonly open = new Set<() => void>();

  constructor(
    private readonly cache: Cache,
    private readonly timing: ChangeStreamTiming,
    private readonly logger: Logger,
    /**
     * Authenticates the stream's request again (its `Authorization` header); throws when the
     * credential no longer holds (a revoked token, an expired or revoked session), which ends
     * the stream: the client's reconnect then gets the 401.
     */
    private readonly reauthenticate: (ctx: GatewayContext) => Promise<unknown>,
  ) {}

  /** A slot's life: three heartbeats, so a live stream never loses it. */
  private get slotSeconds(): number {
    return Math.max(1, Math.ceil((3 * this.timing.heartbeatMs) / 1000));
  }

  /** Takes a free slot of the organization's `cap`, or refuses with 429 `too_many_requests`. */
  async claim(organizationId: bigint, cap: number): Promise<() => Promise<void>> {
    const owner = crypto.randomUUID();
    for (let slot = 0; slot < cap; slot++) {
      const key = `change_stream:${organizationId}:${slot}`;
      if (await this.cache.setIfAbsent(key, owner, this.slotSeconds)) {
        const renew = setInterval(() => {
          this.cache.set(key, owner, this.slotSeconds).catch(() => {});
        }, this.timing.heartbeatMs);
        renew.unref();
        return async () => {
          clearInterval(renew);
          if ((await this.cache.get(key)) === owner) await this.cache.del(key);
        };
      }
    }
    throw domainError(Code.ResourceExhausted, "too_many_requests", {
      [RETRY_AFTER_METADATA]: String(this.slotSeconds),
    });
  }

  /**
   * Streams the changes after the first page as Server-Sent Events into the returned body until
   * the client leaves or the gateway stops; `first` is that page, or `expired` when the cursor
   * had expired (the stream then starts with a `reset`). `call` gives fresh call options for
   * each request to the records service (a signed principal lives a minute).
   */
  start(options: {
    first: ListChangesResponse | "expired";
    pages: ChangePages;
    call: () => Promise<CallOptions>;
    release: () => Promise<void>;
    closed: Promise<void>;
    ctx: GatewayContext;
  }): PassThrough {
    const requestId = options.ctx.state.requestId;
    const body = new PassThrough();
    // Sent at once, so that the headers go out and the client knows the stream is open.
    body.write(": open\n\n");
    let ended = false;
    let wake: (() => void) | undefined;
    const end = () => {
      if (ended) return;
      ended = true;
      wake?.();
    };
    this.open.add(end);
    void options.closed.then(end);
    const heartbeat = setInterval(() => {
      this.reauthenticate(options.ctx).then(
        () => body.write(": keep-alive\n\n"),
        (error: unknown) => {
          this.logger.info(
            { err: error, request_id: requestId },
            "change stream ended: credential",
          );
          end();
        },
      );
    }, this.timing.heartbeatMs);
    heartbeat.unref();
    const pause = (ms: number) =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, ms);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    const send = async (text: string) => {
      if (!body.write(text)) await new Promise((resolve) => body.once("drain", resolve));
    };
    const reset = async () => {
      const present = await options.pages("now", await options.call());
      await send(
        `id: ${present.next}\nevent: reset\ndata: {"next":${JSON.stringify(present.next)}}\n\n`,
      );
      return present.next;
    };
    const sendPage = async (page: ListChangesResponse) => {
      for (const change of page.changes) {
        await send(
          `id: ${change.changeId}\nevent: ${changeTypeName(change)}\ndata: ${changeJson(change)}\n\n`,
        );
      }
    };
    const run = async () => {
      let cursor: string;
      let more = false;
      if (options.first === "expired") {
        cursor = await reset();
      } else {
        await sendPage(options.first);
        cursor = options.first.next;
        more = options.first.hasMore;
      }
      while (!ended) {
        if (!more) await pause(this.timing.pollMs);
        if (ended) break;
        try {
          const page = await options.pages(cursor, await options.call());
          await sendPage(page);
          cursor = page.next;
          more = page.hasMore;
        } catch (error) {
          more = false;
          const reason = errorInfoOf(error)?.reason;
          if (reason === "cursor_expired") {
            cursor = await reset();
          } else if (reason === "table_not_found" || reason === "unauthorized") {
            break;
          } else {
            this.logger.warn({ err: error, request_id: requestId }, "change stream page failed");
          }
        }
      }
    };
    run()
      .catch((error: unknown) =>
        this.logger.warn({ err: error, request_id: requestId }, "change stream failed"),
      )
      .finally(async () => {
        ended = true;
        this.open.delete(end);
        clearInterval(heartbeat);
        body.end();
        await options.release().catch(() => {});
      });
    return body;
  }

  /** Ends every open stream (the gateway is stopping). */
  endAll(): void {
    for (const end of this.open) end();
  }
}
