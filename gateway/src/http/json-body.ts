import { isUtf8 } from "node:buffer";
import { parse } from "@hapi/bourne";
import { Code, domainError } from "@rowbase/kit";
import { Semaphore } from "async-mutex";
import coBody from "co-body";
import type { Context } from "koa";
import { ValidationFailed } from "../errors/validation-failed.js";
import { untilBodyStalls } from "./request-body-timeouts.js";

/** JSON bodies up to 1 MiB: room for a batch of records, and a bound on what a request holds. */
export const JSON_BODY_LIMIT_BYTES = 1024 * 1024;

/**
 * The bodies one gateway replica works on at a time. A body becomes parsed objects, validated
 * copies, the JSON text sent on and the answer's records, several times its own size, and the
 * services hold as much while they work on it: 32 clients each sending 1000 records at once
 * would otherwise hold hundreds of megabytes in the gateway and in records. Past its budget a
 * request waits, holding only its text, until earlier ones are answered. Two budgets, so that
 * the everyday request never waits behind imports:
 *
 * - bodies up to SMALL_JSON_BODY_BYTES (a record, a patch, a form) share 4 MiB: some hundreds of
 *   them at once, still bounded when thousands of clients write together;
 * - larger ones (batches, imports) share one body of the largest size: on two cores, four
 *   batches at once finish no sooner than one after another, and each holds its memory the
 *   whole time.
 *
 * A body counts once it has arrived (`receiveJsonBody`): a share taken for a body still on its
 * way could be held by a client that declares a large body and sends nothing, and a few such
 * requests would stop every JSON route of the replica.
 */
export const SMALL_JSON_BODY_BYTES = 64 * 1024;
export const JSON_BODY_BUDGETS = { small: 4 * JSON_BODY_LIMIT_BYTES, large: JSON_BODY_LIMIT_BYTES };

/**
 * Shares are counted in KiB: the semaphore's release walks every unit it holds, so bytes would
 * make each release a loop of millions.
 */
const UNIT_BYTES = 1024;

/**
 * Admits requests with JSON bodies while the sizes of their bodies fit in their budget (see
 * JSON_BODY_BUDGETS), in order within each.
 */
export class JsonBodyBudget {
  private readonly small: Semaphore;
  private readonly large: Semaphore;

  constructor(budgets: { small: number; large: number } = JSON_BODY_BUDGETS) {
    this.small = new Semaphore(Math.ceil(budgets.small / UNIT_BYTES));
    this.large = new Semaphore(Math.ceil(budgets.large / UNIT_BYTES));
  }

  /** Runs `work` (everything done with a received body) once the body's share fits. */
  run<T>(body: ReceivedBody, work: () => Promise<T>): Promise<T> {
    // At most the limit: text decoded from bytes that are not UTF-8 can be longer than they were.
    const bytes =
      body && "text" in body ? Math.min(Buffer.byteLength(body.text), JSON_BODY_LIMIT_BYTES) : 0;
    if (bytes === 0) return work();
    const budget = bytes <= SMALL_JSON_BODY_BYTES ? this.small : this.large;
    return budget.runExclusive(work, Math.ceil(bytes / UNIT_BYTES));
  }
}

/** application/json and any `+json` type, e.g. application/merge-patch+json. */
const JSON_TYPES = ["application/json", "application/*+json"];

/** A request's JSON body as it arrived: its text, why it cannot be read, or none. */
export type ReceivedBody = { text: string } | { problem: ValidationFailed } | undefined;

/**
 * Reads a request's JSON body as text (not parsed yet; see `JsonBodyBudget`). A wrong content
 * type or charset is kept as the problem to report with the request's other 400 items; a body
 * over the limit is 413 `payload_too_large` at once.
 */
export async function receiveJsonBody(ctx: Context): Promise<ReceivedBody> {
  if (ctx.request.length === 0) return undefined;
  const type = ctx.request.is(JSON_TYPES);
  if (type === null) return undefined;
  if (type === false) {
    return {
      problem: ValidationFailed.of(
        "header",
        "content-type",
        "must be application/json",
        "invalid_value",
      ),
    };
  }
  // The body is read as UTF-8 whatever the header says; a body labelled otherwise would be read
  // as something its sender did not mean.
  const charset = ctx.request.charset.toLowerCase();
  if (charset !== "" && charset !== "utf-8" && charset !== "utf8") {
    return {
      problem: ValidationFailed.of(
        "header",
        "content-type",
        "charset must be utf-8",
        "invalid_value",
      ),
    };
  }
  return readUtf8Body(ctx);
}

/** An HTML form's post. */
export const URL_ENCODED = "application/x-www-form-urlencoded";

/**
 * Reads an `application/x-www-form-urlencoded` body (an HTML form's post, always UTF-8 from a
 * page that says so) as the JSON text of an object holding its pairs under `key`: a name sent
 * once is a string, a name sent again an array of its values in order. The result is then
 * validated as a JSON body is, with the same limits.
 */
export async function receiveUrlEncodedBody(ctx: Context, key: string): Promise<ReceivedBody> {
  const received = await readUtf8Body(ctx);
  if (!received || !("text" in received)) return received;
  const pairs = new Map<string, string | string[]>();
  for (const [name, value] of new URLSearchParams(received.text)) {
    const held = pairs.get(name);
    pairs.set(
      name,
      held === undefined ? value : Array.isArray(held) ? [...held, value] : [held, value],
    );
  }
  // fromEntries defines own properties: a "__proto__" name stays a key, refused as in JSON.
  return { text: JSON.stringify({ [key]: Object.fromEntries(pairs) }) };
}

/** The request body as UTF-8 text, within JSON_BODY_LIMIT_BYTES, or why it cannot be read. */
async function readUtf8Body(ctx: Context): Promise<ReceivedBody> {
  // As bytes: decoded leniently, bytes that are not UTF-8 would become U+FFFD and be stored
  // as a text the client never sent (RFC 8259 8.1: JSON is UTF-8).
  const reading = coBody.text(ctx, {
    limit: JSON_BODY_LIMIT_BYTES,
    encoding: false as unknown as string,
  }) as unknown as Promise<Buffer>;
  // A body that stalls is 408 (untilBodyStalls); one that fails to read is answered below.
  const read = await untilBodyStalls(
    ctx.req,
    reading.then(
      (bytes) => ({ bytes }),
      (error: unknown) => ({ error }),
    ),
  );
  if ("error" in read) {
    const status = (read.error as { status?: unknown }).status;
    if (status === 413) throw domainError(Code.ResourceExhausted, "payload_too_large");
    if (status === 415) {
      return {
        problem: ValidationFailed.of(
          "header",
          "content-encoding",
          "must be gzip, deflate, br or identity",
          "invalid_value",
        ),
      };
    }
    // A body that broke off or did not inflate.
    return { problem: ValidationFailed.of("body", "body", "is not valid JSON", "invalid_syntax") };
  }
  if (!isUtf8(read.bytes))
    return { problem: ValidationFailed.of("body", "body", "must be UTF-8", "invalid_value") };
  return { text: read.bytes.toString("utf8") };
}

/** Only an object or an array may start a body (RFC 8259 whitespace before it). */
const OBJECT_OR_ARRAY = /^[ \t\n\r]*[[{]/;

/**
 * The received body parsed, `undefined` when there is none; an empty one is `{}`. Malformed JSON,
 * a top-level scalar and a `__proto__` key anywhere (each with its own message) are the 400
 * validation envelope (the route's schema refuses an array).
 */
export function parseJsonBody(body: ReceivedBody): unknown {
  if (body === undefined) return undefined;
  if ("problem" in body) throw body.problem;
  if (body.text === "") return {};
  if (OBJECT_OR_ARRAY.test(body.text)) {
    try {
      return parse(body.text, { protoAction: "error" });
    } catch (error) {
      // Valid JSON, but a key that would reach an object's prototype in JavaScript.
      if (error instanceof SyntaxError && error.message.includes("prototype property")) {
        throw ValidationFailed.of(
          "body",
          "body",
          'must not hold a "__proto__" key',
          "invalid_value",
        );
      }
    }
  }
  throw ValidationFailed.of("body", "body", "is not valid JSON", "invalid_syntax");
}
