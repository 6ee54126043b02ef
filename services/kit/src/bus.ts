import { EventEmitter } from "node:events";
import {
  AckPolicy,
  DeliverPolicy,
  type JetStreamClient,
  type JetStreamManager,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
} from "@nats-io/jetstream";
import { connect, type NatsConnection, nanos } from "@nats-io/transport-node";
import type { Logger } from "./logger.js";

export interface BusMessage {
  subject: string;
  data: Uint8Array;
  /** The publisher's id for the message (the outbox row id): consumers deduplicate on it. */
  id: string;
  /** 1 on first delivery, more after a failed handler. */
  deliveryCount: number;
}

export interface StreamSpec {
  name: string;
  subjects: string[];
  /** How long messages are kept. */
  maxAgeSeconds: number;
}

export interface ConsumerSpec {
  stream: string;
  /** Durable name: each service has its own, so each gets every message once. */
  durable: string;
  /** One subject pattern (`org.>`): NATS 2.9 has no multi-subject filters. */
  subject: string;
  /** Deliveries before a message goes to `<stream>.dead` instead. */
  maxDeliver?: number;
}

export type Handler = (message: BusMessage) => Promise<void>;

/**
 * Publish/subscribe with at-least-once delivery. JetStream in production; `MemoryBus` stands in
 * for it in the single-process mode with the same contract (dedup by id, redelivery on throw).
 */
export interface EventBus {
  readonly kind: "nats" | "memory";
  ensureStreams(streams: StreamSpec[]): Promise<void>;
  /** Resolves once the broker stored the message; a repeated `id` is stored once. */
  publish(subject: string, data: Uint8Array, id: string): Promise<void>;
  /** Starts a durable consumer; a handler that throws gets the message again later. */
  consume(spec: ConsumerSpec, handler: Handler): Promise<{ stop(): Promise<void> }>;
  close(): Promise<void>;
}

const DUPLICATE_WINDOW_MS = 2 * 60 * 1000;

export class NatsBus implements EventBus {
  readonly kind = "nats";

  private constructor(
    private readonly nc: NatsConnection,
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly logger: Logger,
    /** Prefixes stream names and subjects so that tests and deployments never collide. */
    private readonly namespace: string,
  ) {}

  static async connect(url: string, logger: Logger, namespace = ""): Promise<NatsBus> {
    const nc = await connect({ servers: url, maxReconnectAttempts: -1, reconnectTimeWait: 500 });
    return new NatsBus(nc, jetstream(nc), await jetstreamManager(nc), logger, namespace);
  }

  private subject(subject: string) {
    return this.namespace ? `${this.namespace}.${subject}` : subject;
  }

  private streamName(name: string) {
    return this.namespace ? `${this.namespace}_${name}` : name;
  }

  async ensureStreams(streams: StreamSpec[]) {
    for (const spec of streams) {
      const config = {
        name: this.streamName(spec.name),
        subjects: spec.subjects.map((s) => this.subject(s)),
        retention: RetentionPolicy.Limits,
        storage: StorageType.File,
        max_age: nanos(spec.maxAgeSeconds * 1000),
        duplicate_window: nanos(Math.min(DUPLICATE_WINDOW_MS, spec.maxAgeSeconds * 1000)),
      };
      try {
        await this.jsm.streams.info(config.name);
        await this.jsm.streams.update(config.name, config);
      } catch {
        await this.jsm.streams.add(config);
      }
    }
  }

  /** Deletes streams (tests remove their namespaced streams with it). */
  async deleteStreams(names: string[]) {
    for (const name of names)
      await this.jsm.streams.delete(this.streamName(name)).catch(() => false);
  }

  async publish(subject: string, data: Uint8Array, id: string) {
    await this.js.publish(this.subject(subject), data, { msgID: id });
  }

  async consume(spec: ConsumerSpec, handler: Handler) {
    const stream = this.streamName(spec.stream);
    const maxDeliver = spec.maxDeliver ?? 10;
    await this.jsm.consumers.add(stream, {
      durable_name: spec.durable,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      max_deliver: maxDeliver,
      ack_wait: nanos(30_000),
      filter_subject: this.subject(spec.subject),
    });
    const consumer = await this.js.consumers.get(stream, spec.durable);
    const messages = await consumer.consume({ max_messages: 64 });
    const prefix = this.namespace ? `${this.namespace}.` : "";
    const done = (async () => {
      for await (const m of messages) {
        const message: BusMessage = {
          subject: m.subject.slice(prefix.length),
          data: m.data,
          id: m.headers?.get("Nats-Msg-Id") ?? `${m.info.stream}:${m.seq}`,
          deliveryCount: m.info.deliveryCount,
        };
        try {
          await handler(message);
          m.ack();
        } catch (error) {
          this.logger.error(
            { err: error, subject: message.subject, id: message.id },
            "consumer failed",
          );
          if (message.deliveryCount >= maxDeliver) {
            await this.publish(`dead.${spec.durable}`, m.data, message.id).catch(() => undefined);
            m.term();
          } else {
            m.nak(Math.min(30_000, 250 * 2 ** message.deliveryCount));
          }
        }
      }
    })();
    return {
      async stop() {
        await messages.close();
        await done;
      },
    };
  }

  async close() {
    await this.nc.drain();
  }
}

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
    this.emitter.emit("message", { subject, data, id, deliveryCount: 1 });
  }

  async consume(spec: ConsumerSpec, handler: Handler) {
    const maxDeliver = spec.maxDeliver ?? 10;
    let chain = Promise.resolve();
    const deliver = (message: BusMessage) => {
      chain = chain.then(async () => {
        for (let attempt = 1; attempt <= maxDeliver; attempt++) {
          try {
            await handler({ ...message, deliveryCount: attempt });
            return;
          } catch (error) {
            this.logger.error({ err: error, subject: message.subject }, "consumer failed");
          }
        }
      });
    };
    const listener = (message: BusMessage) => {
      if (subjectMatches(spec.subject, message.subject)) deliver(message);
    };
    this.emitter.on("message", listener);
    return {
      stop: async () => {
        this.emitter.off("message", listener);
        await chain;
      },
    };
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

export async function createBus(
  url: string | undefined,
  logger: Logger,
  namespace?: string,
): Promise<EventBus> {
  return url ? NatsBus.connect(url, logger, namespace) : new MemoryBus(logger);
}
