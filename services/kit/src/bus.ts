import type { DeadLetter } from "./dead-letters.js";

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
  /**
   * `limits` (the default) keeps a message until its age or the size limit removes it, whoever
   * consumed it: each service has its own durable consumer, and one added later (or reset)
   * still finds the history. `interest`/`workqueue` would drop messages on acknowledgement.
   */
  retention?: "limits" | "interest" | "workqueue";
  /** Size limit of the stream; unlimited when absent. */
  maxBytes?: number;
  /**
   * What a full stream does: `new` refuses further publishes (an outbox keeps them and retries,
   * so nothing is lost), `old` (the default) drops the oldest messages.
   */
  discard?: "old" | "new";
  /** JetStream's window for `Nats-Msg-Id` deduplication; 2 minutes (capped by the age) if absent. */
  duplicateWindowSeconds?: number;
}

export interface ConsumerSpec {
  stream: string;
  /** Durable name: each service has its own, so each gets every message once. */
  durable: string;
  /** One subject pattern (`org.>`): NATS 2.9 has no multi-subject filters. */
  subject: string;
  /**
   * Deliveries before a message goes to `dead.<durable>` (the DEAD stream) instead; 20 when
   * absent. With the backoff between attempts (doubling from 1 s, at most a minute) that is
   * about 15 minutes, so an outage of the consumer's database does not dead-letter its events.
   */
  maxDeliver?: number;
  /**
   * How many messages the handler may work on at once, each acknowledged on its own; 1 when
   * absent, which handles a subject's messages in order, across the service's replicas too. More only for handlers whose events
   * commute (the audit log and usage sums): a consumer that waits on its database one event at
   * a time otherwise falls behind a bulk import. The memory bus (one process) delivers one at a
   * time whatever this says.
   */
  concurrency?: number;
  /**
   * For `consumeBatches`: how many messages, and how many bytes of them, a batch collects at
   * most (the message that passes the byte budget is the last one taken). A batch is what has
   * already arrived, what came while the handler was busy, so it grows with the load and a lone
   * message waits for nobody. Absent: one message at a time.
   */
  batch?: { messages: number; bytes: number };
}

export type Handler = (message: BusMessage) => Promise<void>;

/**
 * Applies several messages at once, all or nothing: when it throws for a batch of several, each
 * message is handed to it again alone, so that one bad message is redelivered (and in the end
 * dead-lettered) on its own and does not hold the others back.
 */
export type BatchHandler = (messages: BusMessage[]) => Promise<void>;

/**
 * Publish/subscribe with at-least-once delivery. JetStream in production; `MemoryBus` stands in
 * for it in the single-process mode with the same contract (dedup by id, redelivery on throw).
 */
export interface EventBus {
  readonly kind: "nats" | "memory";
  ensureStreams(streams: StreamSpec[]): Promise<void>;
  /** Resolves once the broker stored the message; a repeated `id` is stored once. */
  publish(subject: string, data: Uint8Array, id: string): Promise<void>;
  /**
   * Stores `letter` with where it came from and why it was given up, so that an operator can
   * inspect and republish it (consumers deduplicate, so republishing with the original id is
   * safe). Rejects when it was not stored; the same letter twice is stored once.
   */
  deadLetter(letter: DeadLetter): Promise<void>;
  /** Starts a durable consumer; a handler that throws gets the message again later. */
  consume(spec: ConsumerSpec, handler: Handler): Promise<{ stop(): Promise<void> }>;
  /** As `consume`, several messages at a time (`spec.batch`; the memory bus hands over one). */
  consumeBatches(spec: ConsumerSpec, handler: BatchHandler): Promise<{ stop(): Promise<void> }>;
  close(): Promise<void>;
}

/**
 * JetStream's window for `Nats-Msg-Id` deduplication, which the memory bus keeps too: a message
 * published again with the same id within it is stored once.
 */
export const DUPLICATE_WINDOW_MS = 2 * 60 * 1000;
