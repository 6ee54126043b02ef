import { bodyParser } from "@koa/bodyparser";
import { Code, domainError } from "@rowbase/kit";
import { Semaphore } from "async-mutex";
import type { Context } from "koa";
import { ValidationFailed } from "../errors/validation-failed.js";

/** SPEC section 1: JSON bodies up to 1 MiB. */
export const JSON_BODY_LIMIT_BYTES = 1024 * 1024;

/**
 * The bytes of JSON bodies one gateway replica works on at a time: four bodies of the largest
 * size. A body becomes parsed objects, validated copies, the JSON text sent on and the answer's
 * records, several times its own size, so 32 clients each sending 1000 records at once would
 * otherwise hold hundreds of megabytes; past the budget a request waits, its body still unread
 * in the socket, until earlier ones are answered.
 */
export const JSON_BODY_BUDGET_BYTES = 4 * JSON_BODY_LIMIT_BYTES;

/**
 * Shares are counted in KiB: the semaphore's release walks every unit it holds, so bytes would
 * make each release a loop of millions.
 */
const UNIT_BYTES = 1024;

/** Admits requests with JSON bodies while their declared sizes fit in the budget, in order. */
export class JsonBodyBudget {
  private readonly semaphore: Semaphore;

  constructor(bytes: number = JSON_BODY_BUDGET_BYTES) {
    this.semaphore = new Semaphore(Math.ceil(bytes / UNIT_BYTES));
  }

  /**
   * Runs `work` (reading the body and everything done with it) once the body's share fits: its
   * Content-Length, or the whole limit for a chunked body whose size is not known up front.
   */
  run<T>(ctx: Context, work: () => Promise<T>): Promise<T> {
    const declared = ctx.request.length;
    const chunked = ctx.get("transfer-encoding") !== "";
    const bytes = Math.min(
      declared ?? (chunked ? JSON_BODY_LIMIT_BYTES : 0),
      JSON_BODY_LIMIT_BYTES,
    );
    return bytes > 0 ? this.semaphore.runExclusive(work, Math.ceil(bytes / UNIT_BYTES)) : work();
  }
}

/** application/json and any `+json` type, e.g. application/merge-patch+json. */
const JSON_TYPES = ["application/json", "application/*+json"];

// The content type is checked before this runs, so parse whatever arrives as JSON; strict mode
// refuses a top-level scalar before JSON.parse, and the schema refuses an array.
const parseJson = bodyParser({
  enableTypes: ["json"],
  detectJSON: () => true,
  jsonStrict: true,
  jsonLimit: JSON_BODY_LIMIT_BYTES,
  encoding: "utf-8",
});

/**
 * The request's JSON body, or `undefined` when it has none. A wrong content type and malformed
 * JSON are the 400 validation envelope; a body over the limit is 413 `payload_too_large`.
 */
export async function readJsonBody(ctx: Context): Promise<unknown> {
  if (ctx.request.length === 0) return undefined;
  const type = ctx.request.is(JSON_TYPES);
  if (type === null) return undefined;
  if (type === false) {
    throw ValidationFailed.of("header", "content-type", "must be application/json");
  }
  // The parser reads every body as UTF-8 whatever the header says; a body labelled otherwise
  // would be read as something its sender did not mean.
  const charset = ctx.request.charset.toLowerCase();
  if (charset !== "" && charset !== "utf-8" && charset !== "utf8") {
    throw ValidationFailed.of("header", "content-type", "charset must be utf-8");
  }
  try {
    await parseJson(ctx, async () => {});
  } catch (error) {
    const status = (error as { status?: unknown }).status;
    if (status === 413) throw domainError(Code.ResourceExhausted, "payload_too_large");
    if (status === 415) {
      throw ValidationFailed.of("header", "content-type", "charset must be utf-8");
    }
    throw ValidationFailed.of("body", "body", "is not valid JSON");
  }
  return ctx.request.body;
}
