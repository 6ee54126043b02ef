import type { BusMessage, ConsumerSpec, EventBus } from "./bus.js";
import type { Logger } from "./logger.js";

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

/** An error as a dead letter's header holds it: its message, at most 512 characters. */
function errorText(error: unknown): string {
  return String((error as Error)?.message ?? error).slice(0, 512);
}

/** The headers a dead letter is stored with, by `DEAD_LETTER_HEADERS` name. */
export function deadLetterHeaders({
  message,
  origin,
  attempts,
  error,
}: DeadLetter): [string, string][] {
  return [
    [DEAD_LETTER_HEADERS.subject, message.subject],
    [DEAD_LETTER_HEADERS.stream, origin],
    [DEAD_LETTER_HEADERS.id, message.id],
    [DEAD_LETTER_HEADERS.deliveries, String(attempts)],
    [DEAD_LETTER_HEADERS.error, errorText(error)],
  ];
}

/**
 * A dead letter's message id, per dead-letter subject: two consumers giving up the same event are
 * two dead letters, and one consumer giving it up twice is one.
 */
export function deadLetterId({ subject, message }: DeadLetter): string {
  return `${subject}:${message.id}`;
}

/**
 * Dead-letters a message that failed its last delivery to the consumer `spec`, as JetStream
 * would give it up: onto `deadLetterSubject(durable)`. Only if that fails is the message lost.
 */
export async function giveUp(
  bus: EventBus,
  logger: Logger,
  spec: ConsumerSpec,
  message: BusMessage,
  error: unknown,
): Promise<void> {
  const where = { subject: message.subject, id: message.id, durable: spec.durable };
  try {
    await bus.deadLetter({
      subject: deadLetterSubject(spec.durable),
      message,
      origin: spec.stream,
      attempts: message.deliveryCount,
      error,
    });
    logger.error(where, "message dead-lettered");
  } catch (publishError) {
    logger.error({ err: publishError, ...where }, "dead letter not stored: message dropped");
  }
}
