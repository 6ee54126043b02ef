import { AsyncResource } from "node:async_hooks";
import { EventEmitter } from "node:events";
import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
} from "@nats-io/jetstream";
import { connect, headers, type NatsConnection, nanos } from "@nats-io/transport-node";
import type { Attributes } from "@opentelemetry/api";
import { eventTraceparent } from "./events.js";
import type { Logger } from "./logger.js";
import { inConsumerSpan } from "./tracing.js";

/**
 * The messaging attributes of a consumer's span, from OpenTelemetry's messaging semantic
 * conventions. They are not stable yet, and the package's `incubating` entry point that exports
 * them loads every unstable convention (some 5 MiB of a process's memory): OpenTelemetry's
 * advice is to copy the few names used.
 */
const ATTR_MESSAGING_SYSTEM_NAME = "messaging.system.name";
const ATTR_MESSAGING_OPERATION_TYPE = "messaging.operation.type";
const ATTR_MESSAGING_OPERATION_NAME = "messaging.operation.name";
const ATTR_MESSAGING_CONSUMER_GROUP_NAME = "messaging.consumer.group.name";
const ATTR_MESSAGING_DESTINATION_NAME = "messaging.destination.name";
const ATTR_MESSAGING_MESSAGE_ID = "messaging.message.id";
const ATTR_MESSAGING_BATCH_MESSAGE_COUNT = "messaging.batch.message_count";
const MESSAGING_OPERATION_TYPE_VALUE_PROCESS = "process";

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

/** Headers of a dead letter: where it came from and why it was given up. */
export const DEAD_LETTER_HEADERS = {
  subject: "Rowbase-Dead-Subject",
  stream: "Rowbase-Dead-Stream",
  id: "Rowbase-Dead-Id",
  deliveries: "Rowbase-Dead-Deliveries",
  error: "Rowbase-Dead-Error",
} as const;

/** The subject a consumer's given-up messages go to (stored by the DEAD stream, `dead.>`). */
export function deadLetterSubject(durable: string): string {
  return `dead.${durable}`;
}

/**
 * Whether a publish failed in a way no retry can mend: no stream takes the subject (JetStream
 * answers "no responders", which the client reports as JetStreamNotEnabled, as it does while
 * JetStream itself is away; a caller tells the two apart by whether the DEAD stream takes a
 * message), or the message is over the server's max_payload. A full stream, a timeout or a
 * lost connection is not: the message waits. By the errors' names, which the client's public
 * API does not export as classes.
 */
export function undeliverable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  return (
    error.name === "JetStreamNotEnabled" ||
    (error.name === "InvalidArgumentError" && error.message.includes("max_payload"))
  );
}

/** A message given up on, for the DEAD stream. */
export interface DeadLetter {
  /** Where it goes, under `dead.`: `deadLetterSubject(durable)` for a consumer's. */
  subject: string;
  /** The message as it was to be delivered: its subject, data and id. */
  message: Pick<BusMessage, "subject" | "data" | "id">;
  /** The stream it was delivered from, or the outbox it could not leave (`outbox:<schema>`). */
  origin: string;
  /** Failed deliveries (a consumer's) or publishes (an outbox's). */
  attempts: number;
  error: unknown;
}

const DEFAULT_MAX_DELIVER = 20;

/** Delay before the next attempt after `deliveries` failed ones: 1 s, 2 s, 4 s... at most 60 s. */
export function redeliveryDelayMs(deliveries: number): number {
  return Math.min(60_000, 500 * 2 ** Math.min(deliveries, 10));
}

const RETENTION = {
  limits: RetentionPolicy.Limits,
  interest: RetentionPolicy.Interest,
  workqueue: RetentionPolicy.Workqueue,
} as const;

function isApiError(error: unknown, code: number): boolean {
  return error instanceof JetStreamApiError && error.code === code;
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

const DUPLICATE_WINDOW_MS = 2 * 60 * 1000;

export interface NatsBusOptions {
  /**
   * Whether streams get their `maxBytes`. JetStream reserves a stream's max_bytes on the server
   * up front and refuses streams past its `max_file_store`, so every namespace (each test run,
   * each deployment sharing the server) would reserve the whole budget again. By default only
   * the un-namespaced streams of a deployment do; namespaced ones are bounded by age.
   */
  reserveBytes?: boolean;
  /**
   * How long a delivered message may stay unacknowledged before JetStream redelivers it, for
   * every consumer; a handler still at work extends it every third of it. When absent, 10 s for
   * an ordered consumer and 30 s for the others (tests shorten it).
   */
  ackWaitMs?: number;
}
/**
 * The pauses before an ordered consumer tries a failed message again in place, before it hands
 * it back to JetStream for a redelivery later.
 */
const IN_PLACE_RETRY_DELAYS_MS = [250, 1000, 3000];
/**
 * How long a delivered message may stay unacknowledged before JetStream redelivers it. A handler
 * at work extends it, so it only matters for a message nobody is working on: its consumer died
 * with it, or a NATS restart lost its acknowledgement. An ordered consumer waits that long for
 * it, delivering nothing else, so its wait is the shorter; the others' messages can wait in the
 * client's buffer behind a busy handler, so theirs is the longer.
 */
const ACK_WAIT_MS = { ordered: 10_000, unordered: 30_000 };
/**
 * Messages a consumer whose events commute may hold unacknowledged (JetStream's usual default);
 * an ordered one holds one, so that neither a redelivery nor another replica overtakes it.
 */
const UNORDERED_MAX_ACK_PENDING = 1000;

export class NatsBus implements EventBus {
  readonly kind = "nats";

  private constructor(
    private readonly nc: NatsConnection,
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly logger: Logger,
    /** Prefixes stream names and subjects so that tests and deployments never collide. */
    private readonly namespace: string,
    private readonly reserveBytes: boolean,
    private readonly ackWaitMs: number | undefined,
  ) {}

  static async connect(
    url: string,
    logger: Logger,
    namespace = "",
    options: NatsBusOptions = {},
  ): Promise<NatsBus> {
    const nc = await connect({ servers: url, maxReconnectAttempts: -1, reconnectTimeWait: 500 });
    return new NatsBus(
      nc,
      jetstream(nc),
      await jetstreamManager(nc),
      logger,
      namespace,
      options.reserveBytes ?? namespace === "",
      options.ackWaitMs,
    );
  }

  private subject(subject: string) {
    return this.namespace ? `${this.namespace}.${subject}` : subject;
  }

  private streamName(name: string) {
    return this.namespace ? `${this.namespace}_${name}` : name;
  }

  /**
   * Creates each stream, or brings an existing one to the spec (limits, windows, subjects). A
   * change JetStream cannot make in place (the retention or storage type) fails the start
   * loudly rather than running against a stream that is not what the code expects.
   */
  async ensureStreams(streams: StreamSpec[]) {
    for (const spec of streams) {
      const maxAgeMs = spec.maxAgeSeconds * 1000;
      const windowMs = (spec.duplicateWindowSeconds ?? DUPLICATE_WINDOW_MS / 1000) * 1000;
      const config = {
        name: this.streamName(spec.name),
        subjects: spec.subjects.map((s) => this.subject(s)),
        retention: RETENTION[spec.retention ?? "limits"],
        storage: StorageType.File,
        discard: spec.discard === "new" ? DiscardPolicy.New : DiscardPolicy.Old,
        max_age: nanos(maxAgeMs),
        max_bytes: this.reserveBytes ? (spec.maxBytes ?? -1) : -1,
        duplicate_window: nanos(Math.min(windowMs, maxAgeMs)),
      };
      let exists = true;
      try {
        await this.jsm.streams.info(config.name);
      } catch (error) {
        if (!isApiError(error, JetStreamApiCodes.StreamNotFound)) throw error;
        exists = false;
      }
      if (exists) await this.jsm.streams.update(config.name, config);
      else await this.jsm.streams.add(config);
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

  consume(spec: ConsumerSpec, handler: Handler) {
    const { batch: _ignored, ...single } = spec;
    return this.consumeBatches(single, ([message]) => handler(message as BusMessage));
  }

  async consumeBatches(spec: ConsumerSpec, handler: BatchHandler) {
    const stream = this.streamName(spec.stream);
    const maxDeliver = spec.maxDeliver ?? DEFAULT_MAX_DELIVER;
    const limit = spec.batch ?? { messages: 1, bytes: Number.POSITIVE_INFINITY };
    const ordered = (spec.concurrency ?? 1) <= 1 && spec.batch === undefined;
    const ackWaitMs = this.ackWaitMs ?? ACK_WAIT_MS[ordered ? "ordered" : "unordered"];
    await this.ensureConsumer(stream, spec.durable, this.subject(spec.subject), {
      max_deliver: maxDeliver,
      ack_wait: nanos(ackWaitMs),
      max_ack_pending: ordered ? 1 : UNORDERED_MAX_ACK_PENDING,
    });
    const consumer = await this.js.consumers.get(stream, spec.durable);
    const messages = await consumer.consume({ max_messages: 64 });
    const prefix = this.namespace ? `${this.namespace}.` : "";
    const busMessage = (m: JsMsg): BusMessage => ({
      subject: m.subject.slice(prefix.length),
      data: m.data,
      id: m.headers?.get("Nats-Msg-Id") ?? `${m.info.stream}:${m.seq}`,
      deliveryCount: m.info.deliveryCount,
    });
    // One at a time, in order: a failed message is tried again in place a few times before it
    // is handed back; JetStream then delivers nothing else of the consumer until it is
    // acknowledged (max_ack_pending 1), here or in another replica.
    // A handler at work (a type change converting a large table) keeps its messages' ack wait
    // from running out, else JetStream would hand them out again meanwhile.
    const working = async (messages: JsMsg[], work: () => Promise<void>) => {
      const timer = setInterval(() => {
        for (const m of messages) m.working();
      }, ackWaitMs / 3);
      try {
        await work();
      } finally {
        clearInterval(timer);
      }
    };
    const settleOne = async (m: JsMsg) => {
      const message = busMessage(m);
      let failure: unknown;
      const delays = [0, ...(ordered ? IN_PLACE_RETRY_DELAYS_MS : [])];
      for (const [retry, delay] of delays.entries()) {
        if (delay > 0) {
          await working([m], () => new Promise((resolve) => setTimeout(resolve, delay)));
        }
        try {
          // The handler sees each try as a delivery of its own, as JetStream's would count.
          const delivery = { ...message, deliveryCount: message.deliveryCount + retry };
          await working([m], () =>
            handleInSpan(this.kind, spec, [delivery], handler, (error) =>
              this.logger.error(
                { err: error, subject: message.subject, id: message.id },
                "consumer failed",
              ),
            ),
          );
          m.ack();
          return;
        } catch (error) {
          failure = error;
        }
      }
      if (message.deliveryCount >= maxDeliver) {
        await this.giveUp(spec, message, failure);
        m.term();
      } else {
        m.nak(redeliveryDelayMs(message.deliveryCount));
      }
    };
    const settle = async (batch: JsMsg[]) => {
      if (batch.length === 1) return settleOne(batch[0] as JsMsg);
      try {
        await working(batch, () =>
          handleInSpan(this.kind, spec, batch.map(busMessage), handler, (error) =>
            this.logger.warn(
              { err: error, durable: spec.durable, messages: batch.length },
              "batch failed: handling its messages one by one",
            ),
          ),
        );
        for (const m of batch) m.ack();
      } catch {
        for (const m of batch) await settleOne(m);
      }
    };
    // Received messages wait in `queue` (at most a batch per worker, in messages and in bytes:
    // the pump takes no more from the client until there is room) for the next free worker,
    // which takes what is there.
    const concurrency = Math.max(1, spec.concurrency ?? 1);
    const queue: JsMsg[] = [];
    let queuedBytes = 0;
    let ended = false;
    let changed = Promise.withResolvers<void>();
    const notify = () => {
      changed.resolve();
      changed = Promise.withResolvers<void>();
    };
    const pump = (async () => {
      try {
        for await (const m of messages) {
          queue.push(m);
          queuedBytes += m.data.length;
          notify();
          while (
            queue.length >= limit.messages * concurrency ||
            queuedBytes >= limit.bytes * concurrency
          ) {
            await changed.promise;
          }
        }
      } finally {
        ended = true;
        notify();
      }
    })();
    const worker = async () => {
      for (;;) {
        if (queue.length === 0) {
          if (ended) return;
          await changed.promise;
          continue;
        }
        let count = 0;
        let bytes = 0;
        while (
          count < queue.length &&
          count < limit.messages &&
          (count === 0 || bytes < limit.bytes)
        ) {
          bytes += (queue[count] as JsMsg).data.length;
          count += 1;
        }
        const batch = queue.splice(0, count);
        queuedBytes -= bytes;
        notify();
        await settle(batch);
      }
    };
    const done = Promise.all([pump, ...Array.from({ length: concurrency }, worker)]);
    return {
      async stop() {
        await messages.close();
        await done;
      },
    };
  }

  /**
   * The durable consumer with explicit acks, created once and brought to the spec on later
   * starts (max deliveries, ack wait and max ack pending can change in place; its subject filter cannot on
   * NATS 2.9, so a new filter needs a new durable name).
   */
  private async ensureConsumer(
    stream: string,
    durable: string,
    filterSubject: string,
    mutable: { max_deliver: number; ack_wait: number; max_ack_pending: number },
  ) {
    let existing: Awaited<ReturnType<JetStreamManager["consumers"]["info"]>> | undefined;
    try {
      existing = await this.jsm.consumers.info(stream, durable);
    } catch (error) {
      if (!isApiError(error, JetStreamApiCodes.ConsumerNotFound)) throw error;
    }
    if (!existing) {
      await this.jsm.consumers.add(stream, {
        durable_name: durable,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        filter_subject: filterSubject,
        ...mutable,
      });
    } else if (
      existing.config.max_deliver !== mutable.max_deliver ||
      existing.config.ack_wait !== mutable.ack_wait ||
      existing.config.max_ack_pending !== mutable.max_ack_pending
    ) {
      await this.jsm.consumers.update(stream, durable, mutable);
    }
  }

  async deadLetter({ subject, message, origin, attempts, error }: DeadLetter) {
    const h = headers();
    h.set(DEAD_LETTER_HEADERS.subject, message.subject);
    h.set(DEAD_LETTER_HEADERS.stream, origin);
    h.set(DEAD_LETTER_HEADERS.id, message.id);
    h.set(DEAD_LETTER_HEADERS.deliveries, String(attempts));
    h.set(DEAD_LETTER_HEADERS.error, errorText(error));
    // Per dead-letter subject: two consumers giving up the same event are two dead letters.
    await this.js.publish(this.subject(subject), message.data, {
      msgID: `${subject}:${message.id}`,
      headers: h,
    });
  }

  /** Dead-letters a message that failed every delivery; only if that fails is it lost. */
  private async giveUp(spec: ConsumerSpec, message: BusMessage, error: unknown) {
    const where = { subject: message.subject, id: message.id, durable: spec.durable };
    try {
      await this.deadLetter({
        subject: deadLetterSubject(spec.durable),
        message,
        origin: spec.stream,
        attempts: message.deliveryCount,
        error,
      });
      this.logger.error(where, "message dead-lettered");
    } catch (publishError) {
      this.logger.error({ err: publishError, ...where }, "dead letter not stored: message dropped");
    }
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
    // Given up, as JetStream would: keep it on the dead-letter subject.
    this.logger.error(
      { subject: message.subject, id: message.id, durable: spec.durable },
      "message dead-lettered",
    );
    await this.deadLetter({
      subject: deadLetterSubject(spec.durable),
      message,
      origin: spec.stream,
      attempts: maxDeliver,
      error: lastError,
    });
  }

  /** Kept like any message (no headers: nothing in-process reads them). */
  async deadLetter({ subject, message }: DeadLetter) {
    await this.publish(subject, message.data, `${subject}:${message.id}`);
  }

  async consume(spec: ConsumerSpec, handler: Handler) {
    const maxDeliver = spec.maxDeliver ?? DEFAULT_MAX_DELIVER;
    // Handlers run in the consumer's own async context, as they do when NATS delivers: a
    // publish happens inside the publisher's transaction, and its context (MikroORM's
    // transaction context among it) must not leak into another service's handler.
    const scope = new AsyncResource("rowbase.bus.consumer");
    let chain = Promise.resolve();
    const deliver = (message: BusMessage) => {
      chain = chain
        .then(() => scope.runInAsyncScope(() => this.handle(spec, maxDeliver, handler, message)))
        .catch((error: unknown) => this.logger.error({ err: error }, "delivery failed"));
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

  consumeBatches(spec: ConsumerSpec, handler: BatchHandler) {
    return this.consume(spec, (message) => handler([message]));
  }

  async close() {
    this.emitter.removeAllListeners();
  }
}

/**
 * Hands `messages` to `handler` in a consumer span, `<subject> process` (the consumer's subject
 * filter for a batch of several subjects), that continues the trace of the work that wrote them,
 * or links the traces of each when there are several (`inConsumerSpan`, `eventTraceparent`):
 * the handler's logs, calls and queries belong to it, and so does its failure, which `failed`
 * reports before the span ends.
 */
async function handleInSpan(
  system: EventBus["kind"],
  spec: ConsumerSpec,
  messages: BusMessage[],
  handler: BatchHandler,
  failed: (error: unknown) => void,
): Promise<void> {
  const [first] = messages;
  const subject = messages.every((m) => m.subject === first?.subject) ? first?.subject : undefined;
  const attributes: Attributes = {
    [ATTR_MESSAGING_SYSTEM_NAME]: system,
    [ATTR_MESSAGING_OPERATION_TYPE]: MESSAGING_OPERATION_TYPE_VALUE_PROCESS,
    [ATTR_MESSAGING_OPERATION_NAME]: "process",
    [ATTR_MESSAGING_CONSUMER_GROUP_NAME]: spec.durable,
    ...(subject ? { [ATTR_MESSAGING_DESTINATION_NAME]: subject } : {}),
    ...(messages.length === 1
      ? { [ATTR_MESSAGING_MESSAGE_ID]: first?.id }
      : { [ATTR_MESSAGING_BATCH_MESSAGE_COUNT]: messages.length }),
  };
  const traceparents = new Set(messages.map((m) => eventTraceparent(m.subject, m.data)));
  traceparents.delete("");
  await inConsumerSpan(
    { name: `${subject ?? spec.subject} process`, traceparents: [...traceparents], attributes },
    async () => {
      try {
        await handler(messages);
      } catch (error) {
        failed(error);
        throw error;
      }
    },
  );
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

/** An error as a dead letter's header holds it: its message, at most 512 characters. */
function errorText(error: unknown): string {
  return String((error as Error)?.message ?? error).slice(0, 512);
}
