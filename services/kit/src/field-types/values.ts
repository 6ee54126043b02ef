import type { JsonValue } from "@bufbuild/protobuf";
import type { ValidationCode } from "../errors.js";
import { isPlainObject } from "../plain-object.js";
import { codePointLength } from "./names.js";
import {
  type Choice,
  choicesOf,
  type FieldLike,
  linkOptionsOf,
  MAX_LINKS_PER_VALUE,
  type NumberSettings,
  numberSettingsOf,
  textLimitOf,
} from "./options.js";
import { isReadOnlyType } from "./types.js";

/** A value checked against its field: what to store, or what is wrong with it. */
export type ValueResult =
  | { ok: true; value: JsonValue }
  | { ok: false; message: string; code: ValidationCode };

/** The largest `json` value, serialised (UTF-8 bytes of its JSON text). */
export const JSON_MAX_BYTES = 100 * 1024;
/** How deeply a `json` value may nest (arrays and objects). */
export const JSON_MAX_DEPTH = 64;
/** RFC 5321's limits on an e-mail address: the whole of it, and the part before the '@'. */
export const EMAIL_MAX_LENGTH = 254;
export const EMAIL_LOCAL_MAX_LENGTH = 64;
export const URL_MAX_LENGTH = 2_048;
export const PHONE_MAX_LENGTH = 40;
/** The longest numeric string accepted for a number. */
const NUMBER_STRING_MAX = 400;

const ok = (value: JsonValue): ValueResult => ({ ok: true, value });
/** A refused value: what is wrong, for people, and its kind (invalid_value unless said). */
const fail = (message: string, code: ValidationCode = "invalid_value"): ValueResult => ({
  ok: false,
  message,
  code,
});

/**
 * Checks one value written to a field and returns the value to store:
 *
 * - `null` (or `undefined`) clears the value and is always accepted here; whether the field may
 *   be empty (`required`) is the caller's rule, see `isEmptyValue`.
 * - An empty string clears every type except text, long_text and json, which keep it.
 * - text/long_text: at most 10,000 (or `max_length`) / 100,000 characters (code points).
 * - number: a finite JSON number or numeric string, rounded half away from zero to `decimals`,
 *   then checked against `min`/`max` and against what a double keeps exactly
 *   (`inexactNumberProblem`).
 * - date: `YYYY-MM-DD`, a real calendar date in years 1-9999. datetime: RFC 3339 with an offset,
 *   stored as UTC ISO with milliseconds.
 * - single_select: one choice name (matched exactly, else regardless of case; the stored value
 *   is the choice's own spelling). multi_select: an array of them, repeats dropped.
 * - email, url (http/https), phone: checked and trimmed.
 * - json: any JSON value of at most 100 KiB serialised, nested at most 64 deep.
 * - link: an array of row ids (positive integers) or of `{"row_id"}` objects, at most 1,000,
 *   stored as the ascending ids without repeats; at most one when `multiple` is false. Whether
 *   each row exists in the linked table is records' check.
 * - file, autonumber, created_at, updated_at, lookup, rollup: read-only, always refused.
 *
 * No string may hold NUL characters or unpaired surrogates: PostgreSQL cannot store them.
 */
export function validateValue(field: FieldLike, value: unknown): ValueResult {
  if (isReadOnlyType(field.type)) return fail("is read-only", "read_only");
  if (value === null || value === undefined) return ok(null);
  if (
    value === "" &&
    field.type !== "text" &&
    field.type !== "long_text" &&
    field.type !== "json"
  ) {
    return ok(null);
  }
  switch (field.type) {
    case "text":
    case "long_text":
      return checkText(value, textLimitOf(field));
    case "number":
      return checkNumber(value, numberSettingsOf(field));
    case "boolean":
      return typeof value === "boolean" ? ok(value) : fail("must be true or false", "invalid_type");
    case "date":
      return checkDate(value);
    case "datetime":
      return checkDatetime(value);
    case "single_select":
      return checkSingleSelect(value, choicesOf(field.options));
    case "multi_select":
      return checkMultiSelect(value, choicesOf(field.options));
    case "email":
      return checkEmail(value);
    case "url":
      return checkUrl(value);
    case "phone":
      return checkPhone(value);
    case "json":
      return checkJson(value);
    case "link":
      return checkLink(value, linkOptionsOf(field.options)?.multiple !== false);
    default:
      return fail("is read-only", "read_only");
  }
}

/** Whether a value counts as empty for a `required` field: null, missing, "" or []. */
export function isEmptyValue(value: unknown): boolean {
  return (
    value === null ||
    value === undefined ||
    value === "" ||
    (Array.isArray(value) && value.length === 0)
  );
}

/** A link value: the linked row ids, ascending, each once. */
function checkLink(value: unknown, multiple: boolean): ValueResult {
  if (!Array.isArray(value)) {
    return fail("must be an array of row ids", "invalid_type");
  }
  if (value.length > MAX_LINKS_PER_VALUE) {
    return fail(`must link at most ${MAX_LINKS_PER_VALUE} records`, "too_long");
  }
  const ids = new Set<number>();
  for (const item of value) {
    const id = isPlainObject(item) && Object.keys(item).length === 1 ? item.row_id : item;
    if (typeof id !== "number" || !Number.isSafeInteger(id) || id < 1) {
      return fail('must be an array of row ids or of {"row_id"} objects', "invalid_type");
    }
    ids.add(id);
  }
  if (!multiple && ids.size > 1) return fail("must link at most one record", "too_long");
  return ok([...ids].sort((a, b) => a - b));
}

/** The problem with a string PostgreSQL could not store faithfully, if any. */
function storableStringProblem(value: string): string | undefined {
  if (value.includes("\u0000")) return "must not contain NUL characters";
  if (!value.isWellFormed()) return "must be valid Unicode (no unpaired surrogates)";
  return undefined;
}

function checkText(value: unknown, limit: number): ValueResult {
  if (typeof value !== "string") return fail("must be a string", "invalid_type");
  // Code points are at most the UTF-16 units and at least half of them: only a string between
  // `limit` and `2 * limit` units long needs counting.
  if (value.length > limit && (value.length > 2 * limit || codePointLength(value) > limit)) {
    return fail(`must be at most ${limit} characters`, "too_long");
  }
  const problem = storableStringProblem(value);
  return problem ? fail(problem) : ok(value);
}

/**
 * Digits with an optional fraction, each text readable one way only, so that a near miss (400
 * digits and a letter) fails in linear time rather than trying every split of the digits.
 */
const NUMERIC = /^[+-]?(\d+(\.\d*)?|\.\d+)(e[+-]?\d+)?$/i;

/** A JSON number or a numeric string as a finite number; a message otherwise. */
export function parseNumber(value: unknown): number | string {
  let n: number;
  if (typeof value === "number") {
    n = value;
  } else if (typeof value === "string") {
    const text = value.trim();
    if (text.length > NUMBER_STRING_MAX || !NUMERIC.test(text)) return "must be a number";
    n = Number(text);
  } else {
    return "must be a number";
  }
  if (!Number.isFinite(n)) return "must be a finite number";
  return n;
}

/**
 * Rounds half away from zero to `decimals` places through the decimal exponent, which avoids
 * the binary error of `n * 10 ** d` (1.005 rounds to 1.01). A number that is 2^53 or more once
 * shifted by `decimals` is kept: a double that large has no digits past those places (its
 * spacing is wider than a unit of the last one), and past 1e21 the shifted number would be
 * written with an exponent of its own, which the shift back cannot read.
 */
export function roundTo(n: number, decimals: number): number {
  if (!Number.isFinite(n) || Math.abs(n) * 10 ** decimals >= 2 ** 53) return n === 0 ? 0 : n;
  // No more places than `decimals` in its shortest form (most values as sent): nothing to round.
  const text = String(n);
  if (!text.includes("e")) {
    const point = text.indexOf(".");
    if (point < 0 || text.length - point - 1 <= decimals) return n === 0 ? 0 : n;
  }
  const [mantissa, exponent] = Math.abs(n).toExponential().split("e") as [string, string];
  const shifted = Math.round(Number(`${mantissa}e${Number(exponent) + decimals}`));
  const rounded = Math.sign(n) * Number(`${shifted}e${-decimals}`);
  return rounded === 0 ? 0 : rounded;
}

/**
 * Significant digits a double keeps for any decimal number: every number of at most 15 of them
 * reads back as written (IEEE 754's DBL_DIG).
 */
export const EXACT_SIGNIFICANT_DIGITS = 15;

/** The significant digits of a finite number as JavaScript writes it (its shortest form). */
function significantDigits(n: number): number {
  const text = String(Math.abs(n));
  if (text.includes("e") || !text.includes(".")) {
    const [mantissa] = Math.abs(n).toExponential().split("e") as [string];
    return mantissa.replace(".", "").length;
  }
  // A fraction written out: its digits but the leading zeros (0.05: one). Its shortest form
  // ends in no zero, so every other digit is significant, as toExponential counts them.
  const digits = text.replace(".", "");
  let first = 0;
  while (first < digits.length - 1 && digits[first] === "0") first++;
  return digits.length - first;
}

/**
 * Why a number field cannot keep `n` (already rounded to the field's decimals) exactly, if it
 * cannot. Values are stored as IEEE 754 doubles: they keep every whole number up to 2^53 - 1 and
 * every number of at most 15 significant digits; a number past both would be stored as another
 * one (9223372036854775808 as 9223372036854776000, 123456789012.123456789 with 10 decimals as
 * 123456789012.12346), so it is refused rather than changed without a word. Rounding to the
 * field's decimals comes first and is no change the client is not told of: it is the field's
 * documented rule.
 */
export function inexactNumberProblem(n: number, decimals: number): string | undefined {
  if (Math.abs(n) > Number.MAX_SAFE_INTEGER) {
    return (
      `must be between -${Number.MAX_SAFE_INTEGER} and ${Number.MAX_SAFE_INTEGER}, ` +
      "the largest numbers a number field keeps exactly"
    );
  }
  if (Number.isInteger(n) || significantDigits(n) <= EXACT_SIGNIFICANT_DIGITS) return undefined;
  return (
    `must have at most ${EXACT_SIGNIFICANT_DIGITS} significant digits once rounded to ` +
    `${decimals} decimal place${decimals === 1 ? "" : "s"} (or be a whole number): a number ` +
    "field keeps no more exactly"
  );
}

function checkNumber(value: unknown, settings: NumberSettings): ValueResult {
  const parsed = parseNumber(value);
  if (typeof parsed === "string") return fail(parsed);
  const n = roundTo(parsed, settings.decimals);
  if (settings.min !== undefined && n < settings.min)
    return fail(`must be at least ${settings.min}`, "out_of_range");
  if (settings.max !== undefined && n > settings.max)
    return fail(`must be at most ${settings.max}`, "out_of_range");
  const inexact = inexactNumberProblem(n, settings.decimals);
  return inexact ? fail(inexact) : ok(n);
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/**
 * Whether year-month-day names a day of the proleptic Gregorian calendar (no 30 February), for
 * any year: callers bound the years themselves (stored values to 1-9999).
 */
export function isCalendarDate(year: number, month: number, day: number): boolean {
  return month >= 1 && month <= 12 && day >= 1 && day <= daysInMonth(year, month);
}

/** A calendar date of the years that stored dates and date-times may have, 1-9999. */
function isStorableDate(year: number, month: number, day: number): boolean {
  return year >= 1 && year <= 9999 && isCalendarDate(year, month, day);
}

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;

function checkDate(value: unknown): ValueResult {
  if (typeof value !== "string") return fail("must be a date string YYYY-MM-DD", "invalid_type");
  const match = DATE.exec(value.trim());
  if (!match) return fail("must be a date string YYYY-MM-DD");
  const [, y, m, d] = match.map(Number) as [number, number, number, number];
  if (!isStorableDate(y, m, d))
    return fail("must be a real calendar date (years 1-9999)", "out_of_range");
  return ok(value.trim());
}

const DATETIME =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

/** An RFC 3339 date-time as epoch milliseconds, or undefined when it is not one. */
export function parseDatetime(value: string): number | undefined {
  const match = DATETIME.exec(value.trim());
  if (!match) return undefined;
  const [, y, mo, d, h, mi, s, fraction, , sign, oh, om] = match;
  const [year, month, day] = [Number(y), Number(mo), Number(d)];
  const [hour, minute, second] = [Number(h), Number(mi), Number(s)];
  if (!isStorableDate(year, month, day) || hour > 23 || minute > 59 || second > 59) {
    return undefined;
  }
  let offsetMinutes = 0;
  if (sign) {
    const [offsetHours, offsetMins] = [Number(oh), Number(om)];
    if (offsetHours > 23 || offsetMins > 59) return undefined;
    offsetMinutes = (sign === "-" ? -1 : 1) * (offsetHours * 60 + offsetMins);
  }
  const date = new Date(0);
  // setUTCFullYear, not Date.UTC: Date.UTC maps years 0-99 to 1900-1999.
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, Number((fraction ?? "").padEnd(3, "0").slice(0, 3)));
  return date.getTime() - offsetMinutes * 60_000;
}

/**
 * Epoch milliseconds as the stored datetime form, if it lies in years 1-9999 (UTC): the only
 * form datetimes are stored in (records' sorts order them by this text, query/value-expression).
 */
export function datetimeString(ms: number): string | undefined {
  const date = new Date(ms);
  if (Number.isNaN(date.getTime())) return undefined;
  const year = date.getUTCFullYear();
  if (year < 1 || year > 9999) return undefined;
  return date.toISOString();
}

/** The stored form of a datetime (`datetimeString`), years 1000-9999. */
const STORED_DATETIME = /^[1-9]\d{3}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

function checkDatetime(value: unknown): ValueResult {
  const message = "must be an RFC 3339 date-time such as 2026-11-21T10:15:00Z";
  if (typeof value !== "string") return fail(message);
  // Already in the stored form, as a client that writes back what it read sends it: valid
  // when it reads back unchanged (a 30 February or a 24:00 would come back as another day).
  if (STORED_DATETIME.test(value)) {
    const parsed = Date.parse(value);
    if (!Number.isNaN(parsed) && new Date(parsed).toISOString() === value) return ok(value);
  }
  const ms = parseDatetime(value);
  if (ms === undefined) return fail(message);
  const stored = datetimeString(ms);
  return stored ? ok(stored) : fail("must lie in the years 1-9999 (UTC)", "out_of_range");
}

/** A select's choice names, and by lower case the first choice of each. */
interface ChoiceNames {
  exact: ReadonlySet<string>;
  byLowerCase: ReadonlyMap<string, string>;
}

/**
 * The names of each choices list (choicesOf keeps one per field's options), made once: a
 * multi_select value of a 1 MiB body holds some 100,000 names, and searching 1000 choices for
 * each took seconds of the service's only thread.
 */
const choiceNames = new WeakMap<readonly Choice[], ChoiceNames>();

function namesOf(choices: readonly Choice[]): ChoiceNames {
  let names = choiceNames.get(choices);
  if (!names) {
    const byLowerCase = new Map<string, string>();
    for (const { name } of choices) {
      const lower = name.toLowerCase();
      if (!byLowerCase.has(lower)) byLowerCase.set(lower, name);
    }
    names = { exact: new Set(choices.map((c) => c.name)), byLowerCase };
    choiceNames.set(choices, names);
  }
  return names;
}

/** The stored spelling of a choice name: an exact match first, then one regardless of case. */
function choiceNamed(choices: readonly Choice[], raw: string): string | undefined {
  const name = raw.trim();
  const names = namesOf(choices);
  return names.exact.has(name) ? name : names.byLowerCase.get(name.toLowerCase());
}

function checkSingleSelect(value: unknown, choices: readonly Choice[]): ValueResult {
  if (typeof value !== "string") return fail("must be a choice name (a string)", "invalid_type");
  const name = choiceNamed(choices, value);
  return name === undefined ? fail("is not a choice of this field") : ok(name);
}

function checkMultiSelect(value: unknown, choices: readonly Choice[]): ValueResult {
  if (!Array.isArray(value)) return fail("must be an array of choice names", "invalid_type");
  const names: string[] = [];
  const seen = new Set<string>();
  for (const [index, item] of value.entries()) {
    if (typeof item !== "string")
      return fail(`item ${index} must be a choice name (a string)`, "invalid_type");
    const name = choiceNamed(choices, item);
    if (name === undefined) return fail(`item ${index} is not a choice of this field`);
    if (!seen.has(name)) {
      seen.add(name);
      names.push(name);
    }
  }
  return ok(names);
}

const EMAIL_LOCAL = /^[\p{L}\p{N}!#$%&'*+/=?^_`{|}~-]+(\.[\p{L}\p{N}!#$%&'*+/=?^_`{|}~-]+)*$/u;
const DOMAIN_LABEL = /^[\p{L}\p{N}]([\p{L}\p{N}-]{0,61}[\p{L}\p{N}])?$/u;
const TOP_LEVEL = /^(\p{L}{2,63}|xn--[a-z0-9-]{1,59})$/iu;

/** Whether a host name has at least two labels and a top-level label of letters. */
function isDomain(domain: string): boolean {
  const labels = domain.split(".");
  return (
    domain.length <= 253 &&
    labels.length >= 2 &&
    labels.every((label) => DOMAIN_LABEL.test(label)) &&
    TOP_LEVEL.test(labels.at(-1)!)
  );
}

function checkEmail(value: unknown): ValueResult {
  const message = "must be an e-mail address such as ada@example.com";
  if (typeof value !== "string") return fail(message);
  const email = value.trim();
  if (email.length > EMAIL_MAX_LENGTH)
    return fail(`must be at most ${EMAIL_MAX_LENGTH} characters`, "too_long");
  const at = email.lastIndexOf("@");
  if (at < 1) return fail(message);
  const local = email.slice(0, at);
  const domain = email.slice(at + 1);
  if (local.length > EMAIL_LOCAL_MAX_LENGTH || !EMAIL_LOCAL.test(local) || !isDomain(domain))
    return fail(message);
  return ok(email);
}

function checkUrl(value: unknown): ValueResult {
  const message = "must be an absolute http or https URL";
  if (typeof value !== "string") return fail(message);
  const text = value.trim();
  if (text.length > URL_MAX_LENGTH)
    return fail(`must be at most ${URL_MAX_LENGTH} characters`, "too_long");
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it refuses
  if (/[\s\u0000-\u001f\u007f]/.test(text)) return fail("must not contain spaces");
  if (!text.isWellFormed()) return fail(message);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return fail(message);
  }
  if ((url.protocol !== "http:" && url.protocol !== "https:") || url.hostname === "") {
    return fail(message);
  }
  return ok(text);
}

const PHONE = /^\+?[\d\s().\-/]+$/;
const PHONE_EXTENSION = /^(.*?)\s*(?:x|ext\.?|#)\s*\d{1,6}$/i;

function checkPhone(value: unknown): ValueResult {
  const message = "must be a phone number: digits, spaces, ( ) . - /, a leading + and an extension";
  if (typeof value !== "string") return fail(message);
  const phone = value.trim();
  if (phone.length > PHONE_MAX_LENGTH)
    return fail(`must be at most ${PHONE_MAX_LENGTH} characters`, "too_long");
  const main = PHONE_EXTENSION.exec(phone)?.[1] ?? phone;
  if (!PHONE.test(main)) return fail(message);
  const digits = main.replace(/\D/g, "").length;
  if (digits < 3 || digits > 20) return fail("must have 3-20 digits");
  return ok(phone);
}

/** The problem with a value that is not plain JSON PostgreSQL can store, if any. */
function jsonProblem(value: unknown, depth: number): string | undefined {
  switch (typeof value) {
    case "string":
      return storableStringProblem(value);
    case "number":
      return Number.isFinite(value) ? undefined : "must not contain NaN or Infinity";
    case "boolean":
      return undefined;
    case "object": {
      if (value === null) return undefined;
      if (depth >= JSON_MAX_DEPTH) return `must not nest more than ${JSON_MAX_DEPTH} levels`;
      if (Array.isArray(value)) {
        for (const item of value) {
          const problem = jsonProblem(item, depth + 1);
          if (problem) return problem;
        }
        return undefined;
      }
      if (!isPlainObject(value)) return "must be plain JSON";
      for (const key of Object.keys(value)) {
        const problem = storableStringProblem(key) ?? jsonProblem(value[key], depth + 1);
        if (problem) return problem;
      }
      return undefined;
    }
    default:
      return "must be plain JSON";
  }
}

function checkJson(value: unknown): ValueResult {
  const problem = jsonProblem(value, 0);
  if (problem) return fail(problem);
  if (Buffer.byteLength(JSON.stringify(value), "utf8") > JSON_MAX_BYTES) {
    return fail(`must be at most ${JSON_MAX_BYTES} bytes as JSON`, "too_long");
  }
  return ok(value as JsonValue);
}
