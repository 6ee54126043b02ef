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
import {
  type BatchHandler,
  type BusMessage,
  type ConsumerSpec,
  DUPLICATE_WINDOW_MS,
  type EventBus,
  type Handler,
  type StreamSpec,
} from "./bus.js";
import {
  DEFAULT_MAX_DELIVER,
  handleInSpan,
  redeliveryDelayMs,
  runConsumerLoop,
} from "./consumer-loop.js";
import { type DeadLetter, deadLetterHeaders, deadLetterId, giveUp } from "./dead-letters.js";
import type { Logger } from "./logger.js";

const RETENTION = {
  limits: RetentionPolicy.Limits,
  interest: RetentionPolicy.Interest,
  workqueue: RetentionPolicy.Workqueue,
} as const;

function isApiError(error: unknown, code: number): boolean {
  return error instanceof JetStreamApiError && error.code === code;
}

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

/**
 * The event bus on NATS JetStream: file-backed streams, one durable consumer per service and
 * subject filter, explicit acknowledgements, backed-off redeliveries and dead letters.
 */
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
        await giveUp(this, this.logger, spec, message, failure);
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
    const done = runConsumerLoop(messages, {
      concurrency: Math.max(1, spec.concurrency ?? 1),
      batch: limit,
      settle,
    });
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

  async deadLetter(letter: DeadLetter) {
    const h = headers();
    for (const [name, value] of deadLetterHeaders(letter)) h.set(name, value);
    await this.js.publish(this.subject(letter.subject), letter.message.data, {
      msgID: deadLetterId(letter),
      headers: h,
    });
  }

  async close() {
    await this.nc.drain();
  }
}
