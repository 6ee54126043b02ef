import { isCalendarDate } from "@rowbase/kit/field-types";
import { DAY_MS, epochDay, FIRST_DAY, isSupportedDay, LAST_DAY } from "./calendar.js";
import { relativeDay } from "./relative-date.js";

/** A parsed value, or why the text is not one (the caller adds the quoted text and position). */
export type Parsed<T> = { ok: true; value: T } | { ok: false; message: string };

const ok = <T>(value: T): Parsed<T> => ({ ok: true, value });
const fail = <T>(message: string): Parsed<T> => ({ ok: false, message });

const DECIMAL = /^[+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?$/;
const DECIMAL_MAX_LENGTH = 400;

/**
 * A finite decimal number. Stored numbers are JSON numbers (doubles), so the value is read as a
 * double too: `0.1` then compares equal to a stored `0.1`, and anything outside the double
 * range (which no stored number can reach) is refused instead of overflowing `numeric`.
 */
export function parseNumberValue(text: string): Parsed<number> {
  if (text.length > DECIMAL_MAX_LENGTH || !DECIMAL.test(text)) return fail("is not a number");
  const n = Number(text);
  if (!Number.isFinite(n)) return fail("is not a finite number");
  return ok(n === 0 ? 0 : n);
}

const INTEGER = /^[+-]?[0-9]{1,19}$/;
const BIGINT_MAX = 2n ** 63n - 1n;

/** A whole number in PostgreSQL's bigint range (for row_id), as its decimal text. */
export function parseIntegerValue(text: string): Parsed<string> {
  if (!INTEGER.test(text)) return fail("is not a whole number");
  const n = BigInt(text);
  if (n > BIGINT_MAX || n < -BIGINT_MAX - 1n) return fail("is out of range");
  return ok(n.toString());
}

const BOOLEANS: ReadonlyMap<string, boolean> = new Map([
  ["true", true],
  ["false", false],
  ["1", true],
  ["0", false],
]);

/** `true`/`false` (any case) or `1`/`0`. */
export function parseBooleanValue(text: string): Parsed<boolean> {
  const value = BOOLEANS.get(text.toLowerCase());
  return value === undefined ? fail("is not true or false") : ok(value);
}

const DATE = /^([0-9]{4})-([0-9]{2})-([0-9]{2})$/;

function calendarDay(text: string): number | undefined {
  const match = DATE.exec(text);
  if (!match) return undefined;
  const [year, month, day] = [Number(match[1]), Number(match[2]), Number(match[3])];
  if (year < 1 || !isCalendarDate(year, month, day)) return undefined;
  return epochDay(year, month, day);
}

function relativeInRange(text: string, now: Date): Parsed<number> | undefined {
  const day = relativeDay(text, now);
  if (day === undefined) return undefined;
  return isSupportedDay(day) ? ok(day) : fail("is outside the years 1-9999");
}

/** A date field's value: `YYYY-MM-DD` (a real date, years 1-9999) or a relative date. */
export function parseDateValue(text: string, now: Date): Parsed<number> {
  const relative = relativeInRange(text, now);
  if (relative) return relative;
  const day = calendarDay(text);
  if (day === undefined) return fail("is not a date (YYYY-MM-DD, today, daysAgo:N, ...)");
  return ok(day);
}

/**
 * A span of time [from, to) in epoch milliseconds. A datetime value is the millisecond it names
 * (so `eq` with a time copied from a response matches although the column keeps microseconds);
 * a date or relative date is its whole UTC day (`(Due,eq,today)` on a datetime field means
 * "some time today", as in Airtable).
 */
export interface TimeSpan {
  from: number;
  to: number;
}

const DATETIME =
  /^([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:[.]([0-9]{1,9}))?(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))$/;

function instant(text: string): number | undefined {
  const match = DATETIME.exec(text);
  if (!match) return undefined;
  const [, y, mo, d, h, mi, s, fraction, sign, oh, om] = match;
  const day = calendarDay(`${y}-${mo}-${d}`);
  const [hour, minute, second] = [Number(h), Number(mi), Number(s)];
  if (day === undefined || hour > 23 || minute > 59 || second > 59) return undefined;
  let offset = 0;
  if (sign) {
    if (Number(oh) > 23 || Number(om) > 59) return undefined;
    offset = (sign === "-" ? -1 : 1) * (Number(oh) * 60 + Number(om)) * 60_000;
  }
  const millis = Number((fraction ?? "").padEnd(3, "0").slice(0, 3));
  return day * DAY_MS + ((hour * 60 + minute) * 60 + second) * 1000 + millis - offset;
}

/** A datetime field's value: an RFC 3339 date-time, a `YYYY-MM-DD` day or a relative date. */
export function parseDatetimeValue(text: string, now: Date): Parsed<TimeSpan> {
  const relative = relativeInRange(text, now);
  if (relative && !relative.ok) return relative;
  const day = relative?.value ?? calendarDay(text);
  if (day !== undefined) return ok({ from: day * DAY_MS, to: (day + 1) * DAY_MS });
  const ms = instant(text);
  if (ms === undefined) {
    return fail("is not a date-time (RFC 3339 such as 2026-11-21T10:15:00Z, a date, today, ...)");
  }
  if (ms < FIRST_DAY * DAY_MS || ms >= (LAST_DAY + 1) * DAY_MS) {
    return fail("is outside the years 1-9999");
  }
  return ok({ from: ms, to: ms + 1 });
}
