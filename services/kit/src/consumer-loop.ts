import type { Attributes } from "@opentelemetry/api";
import type { BatchHandler, BusMessage, ConsumerSpec, EventBus } from "./bus.js";
import { eventTraceparent } from "./events.js";
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

/** Deliveries of a message before it is dead-lettered, when its consumer does not say. */
export const DEFAULT_MAX_DELIVER = 20;

/** Delay before the next attempt after `deliveries` failed ones: 1 s, 2 s, 4 s... at most 60 s. */
export function redeliveryDelayMs(deliveries: number): number {
  return Math.min(60_000, 500 * 2 ** Math.min(deliveries, 10));
}

/**
 * The loop of one consumer: messages wait in a queue as they arrive (at most a batch per worker,
 * in messages and in bytes: it takes no more from `messages` until there is room) for the next
 * free one of `concurrency` workers, which takes what is there, up to a batch, and settles it.
 * Resolves once `messages` has ended and every message taken from it is settled.
 */
export function runConsumerLoop<M extends { data: Uint8Array }>(
  messages: AsyncIterable<M>,
  options: {
    concurrency: number;
    batch: { messages: number; bytes: number };
    settle: (batch: M[]) => Promise<void>;
  },
): Promise<void> {
  const { concurrency, batch: limit, settle } = options;
  const queue: M[] = [];
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
        bytes += (queue[count] as M).data.length;
        count += 1;
      }
      const batch = queue.splice(0, count);
      queuedBytes -= bytes;
      notify();
      await settle(batch);
    }
  };
  return Promise.all([pump, ...Array.from({ length: concurrency }, worker)]).then(() => {});
}

/**
 * Hands `messages` to `handler` in a consumer span, `<subject> process` (the consumer's subject
 * filter for a batch of several subjects), that continues the trace of the work that wrote them,
 * or links the traces of each when there are several (`inConsumerSpan`, `eventTraceparent`):
 * the handler's logs, calls and queries belong to it, and so does its failure, which `failed`
 * reports before the span ends.
 */
export async function handleInSpan(
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
