import { EventEmitter } from "node:events";
import {
  type BatchHandler,
  type BusMessage,
  type ConsumerSpec,
  DUPLICATE_WINDOW_MS,
  type EventBus,
  type Handler,
} from "./bus.js";
import {
  DEFAULT_MAX_DELIVER,
  handleInSpan,
  redeliveryDelayMs,
  runConsumerLoop,
} from "./consumer-loop.js";
import { type DeadLetter, deadLetterId, giveUp } from "./dead-letters.js";
import type { Logger } from "./logger.js";

/**
 * In-process stand-in: remembers published ids like JetStream's duplicate window and retries a
 * failing handler. It keeps no history: consumers start with the process, before anything is
 * published.
 */
export class MemoryBus implements EventBus {
  readonly kind = "memory";
  private readonly emitter = new EventEmitter();
  /** Ids published within the duplicate window, with when they were published. */
  private readonly seen = new Map<string, number>();
  /** Messages published while held (`hold`), for the consumers that subscribe before `release`. */
  private held: BusMessage[] | undefined;

  constructor(private readonly logger: Logger) {
    this.emitter.setMaxListeners(0);
  }

  async ensureStreams() {}

  async publish(subject: string, data: Uint8Array, id: string) {
    const now = Date.now();
    if (this.seen.has(id)) return;
    if (this.seen.size > 10_000) {
      for (const [seenId, at] of this.seen)
        if (now - at > DUPLICATE_WINDOW_MS) this.seen.delete(seenId);
    }
    this.seen.set(id, now);
    const message = { subject, data, id, deliveryCount: 1 };
    if (this.held) this.held.push(message);
    else this.emitter.emit("message", message);
  }

  /**
   * Keeps what is published from now on until `release`. With no history, a message published
   * before its consumer subscribed would be lost: one process that starts its services one by
   * one holds the bus until every consumer is there (an outbox relay of the first service may
   * publish what an earlier run left before the last service subscribed).
   */
  hold(): void {
    this.held ??= [];
  }

  /** Delivers what was held, in order, and delivers at once from now on. */
  release(): void {
    const held = this.held ?? [];
    this.held = undefined;
    for (const message of held) this.emitter.emit("message", message);
  }

  /**
   * Delivers one message, retrying a failing handler with JetStream's backoff (1 s doubling to
   * 60 s: about 15 minutes in all, so that a database restart does not cost the event) and
   * dead-lettering after the last try. The consumer's later messages wait meanwhile, in order.
   */
  private async handle(
    spec: ConsumerSpec,
    maxDeliver: number,
    handler: Handler,
    message: BusMessage,
  ) {
    let lastError: unknown;
    for (let attempt = 1; attempt <= maxDeliver; attempt++) {
      if (attempt > 1) {
        await new Promise((resolve) => setTimeout(resolve, redeliveryDelayMs(attempt - 1)));
      }
      try {
        await handleInSpan(
          this.kind,
          spec,
          [{ ...message, deliveryCount: attempt }],
          ([delivery]) => handler(delivery as BusMessage),
          (error) => this.logger.error({ err: error, subject: message.subject }, "consumer failed"),
        );
        return;
      } catch (error) {
        lastError = error;
      }
    }
    await giveUp(this, this.logger, spec, { ...message, deliveryCount: maxDeliver }, lastError);
  }

  /** Kept like any message (no headers: nothing in-process reads them). */
  async deadLetter(letter: DeadLetter) {
    await this.publish(letter.subject, letter.message.data, deadLetterId(letter));
  }

  async consume(spec: ConsumerSpec, handler: Handler) {
    const maxDeliver = spec.maxDeliver ?? DEFAULT_MAX_DELIVER;
    const inbox = new Inbox<BusMessage>();
    const listener = (message: BusMessage) => {
      if (subjectMatches(spec.subject, message.subject)) inbox.push(message);
    };
    this.emitter.on("message", listener);
    // The loop starts here, so handlers run in the consumer's own async context, as they do when
    // NATS delivers: a publish happens inside the publisher's transaction, and its context
    // (MikroORM's transaction context among it) must not leak into another service's handler.
    const done = runConsumerLoop(inbox, {
      concurrency: 1,
      batch: { messages: 1, bytes: Number.POSITIVE_INFINITY },
      settle: ([message]) =>
        this.handle(spec, maxDeliver, handler, message as BusMessage).catch((error: unknown) =>
          this.logger.error({ err: error }, "delivery failed"),
        ),
    });
    return {
      stop: async () => {
        this.emitter.off("message", listener);
        inbox.end();
        await done;
      },
    };
  }

  consumeBatches(spec: ConsumerSpec, handler: BatchHandler) {
    return this.consume(spec, (message) => handler([message]));
  }

  async close() {
    this.emitter.removeAllListeners();
  }
}

/** NATS subject matching: `*` one token, `>` the rest. */
export function subjectMatches(pattern: string, subject: string): boolean {
  const p = pattern.split(".");
  const s = subject.split(".");
  for (let i = 0; i < p.length; i++) {
    if (p[i] === ">") return s.length > i;
    if (i >= s.length || (p[i] !== "*" && p[i] !== s[i])) return false;
  }
  return p.length === s.length;
}

/** What is published for one consumer, in order, until `end` (and what was pushed is taken). */
class Inbox<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private ended = false;
  private arrived = Promise.withResolvers<void>();

  push(item: T): void {
    this.items.push(item);
    this.arrived.resolve();
  }

  end(): void {
    this.ended = true;
    this.arrived.resolve();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      if (this.items.length > 0) {
        yield this.items.shift() as T;
        continue;
      }
      if (this.ended) return;
      await this.arrived.promise;
      this.arrived = Promise.withResolvers<void>();
    }
  }
}
