import { create } from "@bufbuild/protobuf";
import { type Timestamp, TimestampSchema } from "@bufbuild/protobuf/wkt";
import { isCalendarDate } from "@rowbase/kit/field-types";
import { z } from "zod";

/**
 * Query-string values of the management list routes (audit log, API statistics): each read
 * from the one string a parameter carries, a repeated parameter refused rather than one of its
 * values picked. The preprocess step is outermost so that the document shows the type and
 * whether the parameter is required.
 */

/** Whether a parameter came once; a repeated one gets the issue that says so. */
export function givenOnce(value: unknown, ctx: z.RefinementCtx): boolean {
  if (!Array.isArray(value)) return true;
  ctx.addIssue({ code: "custom", message: "must be given once", input: value });
  return false;
}

/** `givenOnce` as a preprocess step: the value as it came. */
export function once(value: unknown, ctx: z.RefinementCtx): unknown {
  givenOnce(value, ctx);
  return value;
}

/**
 * A whole number, digits only, in [min, max], with a default when absent. The default sits
 * inside the preprocess step so the document shows it and the parameter as optional.
 */
export function queryInteger(min: number, max: number, fallback: number) {
  const message = `must be an integer between ${min} and ${max}`;
  return z.preprocess(
    (value, ctx) => {
      if (Array.isArray(value)) return once(value, ctx);
      if (typeof value === "string") {
        if (/^[0-9]{1,10}$/.test(value)) return Number(value);
        ctx.addIssue({ code: "custom", message, input: value });
      }
      return value;
    },
    z.number().int({ error: message }).min(min, message).max(max, message).default(fallback),
  );
}

/**
 * Text of at most `max` characters (code points) and, when given, of the `format` pattern,
 * which the document shows; a text too long is told so, not also that it fails the pattern.
 */
export function queryText(max: number, format?: { pattern: RegExp; message: string }) {
  const message = `must be at most ${max} characters`;
  const text = z
    .string()
    .max(2 * max, message)
    .refine((value) => Array.from(value).length <= max, { message, abort: true });
  return z.preprocess(
    once,
    (format ? text.refine((value) => format.pattern.test(value), format.message) : text).meta({
      maxLength: max,
      ...(format ? { pattern: format.pattern.source } : {}),
    }),
  );
}

/** The instants a google.protobuf.Timestamp holds: 0001-01-01 to 9999-12-31, UTC. */
const TIMESTAMP_MIN_SECONDS = -62_135_596_800;
const TIMESTAMP_MAX_SECONDS = 253_402_300_799;

const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

/**
 * An RFC 3339 date-time (`2026-11-21T10:15:00.000Z`, any offset, up to nanoseconds) as the exact
 * protobuf Timestamp, or undefined when it is not one. Leap seconds (`:60`) are refused:
 * Timestamp has none.
 */
export function parseRfc3339(text: string): Timestamp | undefined {
  const match = RFC3339.exec(text);
  if (!match) return undefined;
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  if (!isCalendarDate(year, month, day) || hour > 23 || minute > 59 || second > 59) {
    return undefined;
  }
  let offsetMinutes = 0;
  if (!match[8]) {
    const offsetHours = Number(match[10]);
    const offsetRest = Number(match[11]);
    if (offsetHours > 23 || offsetRest > 59) return undefined;
    offsetMinutes = (match[9] === "-" ? -1 : 1) * (offsetHours * 60 + offsetRest);
  }
  const utc = new Date(0);
  utc.setUTCFullYear(year, month - 1, day);
  utc.setUTCHours(hour, minute, second, 0);
  const seconds = utc.getTime() / 1000 - offsetMinutes * 60;
  if (seconds < TIMESTAMP_MIN_SECONDS || seconds > TIMESTAMP_MAX_SECONDS) return undefined;
  const nanos = Number((match[7] ?? "").padEnd(9, "0"));
  return create(TimestampSchema, { seconds: BigInt(seconds), nanos });
}

/** An RFC 3339 date-time in the query string, as the protobuf Timestamp an RPC takes. */
export const queryTimestamp = z.preprocess(
  once,
  z
    .string()
    .transform((text, ctx) => {
      const timestamp = parseRfc3339(text);
      if (timestamp) return timestamp;
      ctx.addIssue({
        code: "custom",
        message: "must be an RFC 3339 date-time such as 2026-11-21T10:15:00.000Z",
        input: text,
      });
      return z.NEVER;
    })
    .meta({ format: "date-time" }),
);

/**
 * A calendar day `YYYY-MM-DD` in the years 1-9999, kept as that text (the services take dates as
 * text and keep them in PostgreSQL, which has no year 0).
 */
export const queryDate = z.preprocess(
  once,
  z
    .string()
    .refine((text) => {
      const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text);
      if (match === null) return false;
      const year = Number(match[1]);
      return year >= 1 && isCalendarDate(year, Number(match[2]), Number(match[3]));
    }, "must be a date YYYY-MM-DD")
    .meta({ format: "date" }),
);
