import { bodyParser } from "@koa/bodyparser";
import { Code, domainError } from "@rowbase/kit";
import type { Context } from "koa";
import { ValidationFailed } from "../errors/validation-failed.js";

/** SPEC section 1: JSON bodies up to 1 MiB. */
export const JSON_BODY_LIMIT_BYTES = 1024 * 1024;

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
