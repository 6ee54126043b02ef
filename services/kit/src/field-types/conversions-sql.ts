import type { JsonValue } from "@bufbuild/protobuf";
import { canChangeType, convertValue, FALSE_WORDS, TRUE_WORDS } from "./conversions.js";
import {
  choicesOf,
  type FieldLike,
  isSelectType,
  numberSettingsOf,
  textLimitOf,
} from "./options.js";
import {
  EMAIL_LOCAL_MAX_LENGTH,
  EMAIL_MAX_LENGTH,
  EXACT_SIGNIFICANT_DIGITS,
  JSON_MAX_BYTES,
  PHONE_MAX_LENGTH,
  URL_MAX_LENGTH,
} from "./values.js";

/**
 * `convertValue` as SQL, so that records converts a column of a million values in PostgreSQL
 * rather than one value at a time in Node: the same rules, value for value and refusal for
 * refusal, each written here beside its Node form's place in conversions.ts and values.ts
 * (services/records/test/type-change-sql.int.test.ts holds the two together on PostgreSQL, for
 * every pair the type-change table allows). A change of a rule there is made here too.
 *
 * Values are in records' columns (services/records/src/db/user-tables/columns.ts): text for the
 * text types, numeric, boolean, date, timestamptz (datetime, and a record's own times for
 * created_at / updated_at), a choice id as text for single_select and their array (text[]) for
 * multi_select, jsonb, bigint (autonumber).
 *
 * A few values only Node judges exactly: text with characters beyond ASCII becoming a boolean,
 * select, e-mail, URL or phone (JavaScript's case rules, Unicode letter classes), a URL that is
 * not of the plain form `http(s)://host.name[:port][/...]` (the WHATWG URL parser's), a json
 * object or array shown as text (JavaScript's JSON text), a number shown as text whose `toFixed`
 * digits go past what a double holds. `inNode` holds for those; the caller converts them with
 * `convertValue`. Everything else is decided here.
 */
export interface ConversionSql {
  /**
   * Named steps, in order: each an SQL expression over the ones before it (by name), the first
   * being the source value itself. `conversionFrom` makes them columns.
   */
  steps: readonly (readonly [name: string, sql: string])[];
  /** The converted value, of the target column's type (null when refused or left to Node). */
  value: string;
  /** Why the value does not convert (text), null when it does or is left to Node. */
  problem: string;
  /** Whether the value is left to Node (`convertValue`). */
  inNode: string;
  /** Whether the source value counts as empty (`isEmptyValue`): for the `required` rule. */
  sourceEmpty: string;
  /** Whether the converted value counts as empty. */
  valueEmpty: string;
}

/**
 * The rows of `rows` (a FROM item holding the columns the source expression names) with each
 * step as a column: a subquery per step, each fenced (`offset 0`) so that PostgreSQL computes a
 * step once per row rather than copying its expression into every later one.
 */
export function conversionFrom(conversion: ConversionSql, rows: string): string {
  let from = rows;
  for (const [name, sql] of conversion.steps) {
    from = `(select s.*, ${sql} as ${name} from ${from} as s offset 0)`;
  }
  return from;
}

/** An SQL string literal (standard_conforming_strings, PostgreSQL's default). */
export const sqlLiteral = (text: string): string => `'${text.replaceAll("'", "''")}'`;

const jsonbLiteral = (value: JsonValue): string => `${sqlLiteral(JSON.stringify(value))}::jsonb`;

/** JavaScript's white space (`String.prototype.trim`, `\s`). */
const JS_SPACE =
  "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" +
  "\u2028\u2029\u202f\u205f\u3000\ufeff";
const jsTrim = (text: string) => `btrim(${text}, ${sqlLiteral(JS_SPACE)})`;
const ASCII_SPACE = "[ \t\n\v\f\r]";
const isAscii = (text: string) => `(${text} !~ '[^\\x01-\\x7f]')`;
const asciiLower = (text: string) =>
  `translate(${text}, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')`;

/** Builds the steps of one conversion. */
class Steps {
  readonly steps: [string, string][] = [];
  /** A step: returns its name, how later expressions refer to its value. */
  add(sql: string): string {
    const name = `c${this.steps.length}`;
    this.steps.push([name, sql]);
    return name;
  }
}

interface Converted {
  value: string;
  problem: string;
  inNode?: string;
}

const NONE = "null::text";
const when = (cond: string, then: string, otherwise = "null") =>
  `(case when ${cond} then ${then} else ${otherwise} end)`;

/**
 * The SQL conversion of the column value `source` of field `from` into field `to`'s column.
 * Throws for a pair the type-change table does not allow (the caller checks `canChangeType`
 * first) and for the types without a column of their own to convert into.
 */
export function conversionSql(from: FieldLike, to: FieldLike, source: string): ConversionSql {
  if (!canChangeType(from.type, to.type)) {
    throw new Error(`cannot convert ${from.type} to ${to.type}`);
  }
  const s = new Steps();
  const src = s.add(source);
  const converted = convert(s, from, to, src);
  const inNode = `coalesce(${src} is not null and ${converted.inNode ?? "false"}, false)`;
  const skip = `${src} is null or ${inNode}`;
  const value = s.add(`(case when ${skip} then null else ${converted.value} end)`);
  const problem = s.add(`(case when ${skip} then null else ${converted.problem} end)::text`);
  return {
    steps: s.steps,
    value,
    problem,
    inNode,
    sourceEmpty: emptySql(from, sourceShown(from, src)),
    valueEmpty: emptySql(to, value),
  };
}

/** What Node sees of a source value for the `required` rule: choices it no longer has are none. */
function sourceShown(from: FieldLike, src: string): string {
  if (from.type === "single_select") return `(${choiceNames(from)} ->> ${src})`;
  if (from.type === "multi_select") return knownIds(from, src);
  return src;
}

/** Whether a column value is empty as `isEmptyValue` sees it: none, "" or []. */
function emptySql(field: FieldLike, value: string): string {
  switch (field.type) {
    case "multi_select":
      return `(${value} is null or cardinality(${value}) = 0)`;
    case "json":
      return `(${value} is null or ${value} in ('""'::jsonb, '[]'::jsonb))`;
    case "number":
    case "boolean":
    case "date":
    case "datetime":
    case "autonumber":
    case "created_at":
    case "updated_at":
      return `(${value} is null)`;
    default:
      return `(${value} is null or ${value} = '')`;
  }
}

function convert(s: Steps, from: FieldLike, to: FieldLike, src: string): Converted {
  // The system's own values stay as they are.
  if (from.type === to.type && (to.type === "autonumber" || to.type === "file")) {
    return { value: src, problem: NONE };
  }
  if (isSelectType(from.type) && isSelectType(to.type)) return selectToSelect(s, from, to, src);
  if (to.type === "text" || to.type === "long_text") return toText(s, from, to, src);
  if (from.type === "text" || from.type === "long_text") return fromText(s, to, src);
  switch (to.type) {
    case "number":
      // number (new options) or autonumber.
      return checkNumber(s, to, s.add(`${src}::float8`));
    case "date":
      if (from.type === "date") return { value: src, problem: NONE };
      return { value: `(${src} at time zone 'UTC')::date`, problem: NONE };
    case "datetime":
      if (from.type === "date")
        return { value: `(${src}::timestamp at time zone 'UTC')`, problem: NONE };
      return { value: `date_trunc('milliseconds', ${src})`, problem: NONE };
    case "email":
    case "url":
    case "phone":
      // The same type with other options: checked again, as stored ("" is none).
      return checkTextual(s, to.type, s.add(`nullif(${src}, '')`));
    default:
      // boolean, json: values of the type stay as they are.
      return { value: src, problem: NONE };
  }
}

// ---------------------------------------------------------------------------------------------
// Selects

/** A select's choices, id to name, as a jsonb object. */
function choiceNames(field: FieldLike): string {
  return jsonbLiteral(Object.fromEntries(choicesOf(field.options).map((c) => [c.id, c.name])));
}

/** A multi_select's ids that name a choice of the field, in order. */
function knownIds(field: FieldLike, ids: string): string {
  return `array(select u.id from unnest(${ids}) with ordinality as u(id, i) where ${choiceNames(field)} ? u.id order by u.i)`;
}

/** The id a choice of `field` named `name` is stored as (its first choice of that name). */
function idOf(field: FieldLike, name: string): string | undefined {
  return choicesOf(field.options).find((c) => c.name === name)?.id;
}

/**
 * Between selects each choice of `from` converts as Node converts it (`convertValue` on its
 * name: followed by id, or refused as removed), so this builds, per choice id of `from`, the id
 * it becomes or why it does not; ids `from` no longer has are no value, as Node reads them.
 */
function selectToSelect(s: Steps, from: FieldLike, to: FieldLike, src: string): Converted {
  const ids: Record<string, string> = {};
  const refusals: Record<string, string> = {};
  for (const choice of choicesOf(from.options)) {
    if (idOf(from, choice.name) !== choice.id) continue; // Node reads this id as the first of its name.
    const one = convertValue(
      { type: "single_select", options: from.options },
      { type: "single_select", options: to.options },
      choice.name,
    );
    if (!one.ok) refusals[choice.id] = one.message;
    else ids[choice.id] = idOf(to, one.value as string)!;
  }
  // A choice of `from` whose name another choice before it has: Node takes it for that one.
  for (const choice of choicesOf(from.options)) {
    const first = idOf(from, choice.name)!;
    if (first !== choice.id) {
      if (first in ids) ids[choice.id] = ids[first]!;
      if (first in refusals) refusals[choice.id] = refusals[first]!;
    }
  }
  const idMap = jsonbLiteral(ids);
  const refusalMap = jsonbLiteral(refusals);
  if (from.type === "single_select") {
    const id = s.add(`(${idMap} ->> ${src})`);
    return {
      value: to.type === "multi_select" ? when(`${id} is not null`, `array[${id}]`) : id,
      problem: `(${refusalMap} ->> ${src})`,
    };
  }
  const mapped = s.add(
    `array(select ${idMap} ->> u.id from unnest(${src}) with ordinality as u(id, i) where ${idMap} ? u.id order by u.i)`,
  );
  const removed = `(select ${refusalMap} ->> u.id from unnest(${src}) with ordinality as u(id, i) where ${refusalMap} ? u.id order by u.i limit 1)`;
  if (to.type === "multi_select") return { value: distinct(mapped), problem: removed };
  return {
    value: `${mapped}[1]`,
    problem: `coalesce(${removed}, ${when(`cardinality(${mapped}) > 1`, "'holds more than one choice'")})`,
  };
}

/** An array without its repeats, in the order of their first places. */
const distinct = (array: string) =>
  `array(select d.x from unnest(${array}) with ordinality as d(x, i) group by d.x order by min(d.i))`;

/** The id text names in a select (`choiceNamed`): exactly, else regardless of (ASCII) case. */
function choiceIdSql(field: FieldLike, text: string): string {
  const exact: Record<string, string> = {};
  const lower: Record<string, string> = {};
  for (const { name, id } of choicesOf(field.options)) {
    exact[name] ??= id;
    lower[name.toLowerCase()] ??= idOf(field, name)!;
  }
  return `coalesce(${jsonbLiteral(exact)} ->> ${text}, ${jsonbLiteral(lower)} ->> ${asciiLower(text)})`;
}

// ---------------------------------------------------------------------------------------------
// To text

function toText(s: Steps, from: FieldLike, to: FieldLike, src: string): Converted {
  let text: string;
  let inNode: string | undefined;
  switch (from.type) {
    case "number": {
      // toFixed writes the double's binary digits: the decimal ones only while they are all
      // a double holds (a whole number, or at most 15 digits in all); Node writes the others.
      const { decimals } = numberSettingsOf(from);
      text = `round(${src}, ${decimals})::text`;
      inNode = `not (${src} = round(${src}, ${decimals}) and (${src} = trunc(${src}) or abs(${src}) < 1e${15 - decimals}))`;
      break;
    }
    case "autonumber":
    case "boolean":
      text = `${src}::text`;
      break;
    case "date":
      text = `to_char(${src}, 'YYYY-MM-DD')`;
      break;
    case "datetime":
    case "created_at":
    case "updated_at":
      text = `to_char(${src} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
      break;
    case "single_select":
      text = `(${choiceNames(from)} ->> ${src})`;
      break;
    case "multi_select":
      text = `array_to_string(array(select ${choiceNames(from)} ->> u.id from unnest(${src}) with ordinality as u(id, i) where ${choiceNames(from)} ? u.id order by u.i), ', ')`;
      break;
    case "json":
      // JavaScript's JSON text of an object or array is Node's to write.
      inNode = `jsonb_typeof(${src}) in ('object', 'array')`;
      text = `(case jsonb_typeof(${src}) when 'string' then ${src} #>> '{}' when 'number' then ${jsNumberText(`${src}::float8`)} else ${src}::text end)`;
      break;
    default:
      text = src;
  }
  const shown = s.add(text);
  const limit = textLimitOf(to);
  return {
    value: shown,
    problem: when(
      `char_length(${shown}) > ${limit}`,
      sqlLiteral(`must be at most ${limit} characters`),
    ),
    ...(inNode ? { inNode } : {}),
  };
}

/** A double as JavaScript writes it (`String(n)`): plain from 1e-6 to 1e21, else 1.5e-7, 1e+21. */
function jsNumberText(double: string): string {
  return `(case when ${double} = 0 then '0' when abs(${double}) >= 1e-6 and abs(${double}) < 1e21 then ${double}::text::numeric::text else regexp_replace(${double}::text, 'e([+-])0*([0-9])', 'e\\1\\2') end)`;
}

// ---------------------------------------------------------------------------------------------
// From text

function fromText(s: Steps, to: FieldLike, src: string): Converted {
  // Blank text is no value.
  const trimmed = s.add(`nullif(${jsTrim(src)}, '')`);
  const converted = fromTrimmed(s, to, src, trimmed);
  return {
    value: when(`${trimmed} is not null`, converted.value),
    problem: when(`${trimmed} is not null`, converted.problem, NONE),
    inNode: `(${trimmed} is not null and ${converted.inNode ?? "false"})`,
  };
}

function fromTrimmed(s: Steps, to: FieldLike, src: string, trimmed: string): Converted {
  switch (to.type) {
    case "number":
      return parseNumber(s, to, trimmed);
    case "boolean": {
      const word = asciiLower(trimmed);
      const list = (words: ReadonlySet<string>) => [...words].map(sqlLiteral).join(", ");
      return {
        value: `(case when ${word} in (${list(TRUE_WORDS)}) then true when ${word} in (${list(FALSE_WORDS)}) then false end)`,
        problem: `(case when ${word} in (${list(TRUE_WORDS)}, ${list(FALSE_WORDS)}) then null else 'must be true or false' end)`,
        inNode: `not ${isAscii(trimmed)}`,
      };
    }
    case "date":
      return checkDate(s, trimmed);
    case "datetime":
      // A bare date is its midnight UTC.
      return checkDatetime(
        s,
        s.add(
          when(
            `${trimmed} ~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}$'`,
            `${trimmed} || 'T00:00:00Z'`,
            trimmed,
          ),
        ),
      );
    case "single_select": {
      const id = s.add(choiceIdSql(to, trimmed));
      return {
        value: id,
        problem: when(`${id} is null`, "'is not a choice of this field'"),
        inNode: `not ${isAscii(trimmed)}`,
      };
    }
    case "multi_select":
      return multiFromText(s, to, trimmed);
    case "email":
    case "url":
    case "phone":
      return checkTextual(s, to.type, trimmed);
    case "json": {
      // The text as it is, a JSON string.
      const json = s.add(`to_jsonb(${src})`);
      return {
        value: json,
        problem: when(
          `octet_length(${json}::text) > ${JSON_MAX_BYTES}`,
          sqlLiteral(`must be at most ${JSON_MAX_BYTES} bytes as JSON`),
        ),
      };
    }
    default:
      throw new Error(`no conversion from text to ${to.type}`);
  }
}

/** The whole text when it names a choice (names may hold commas), else its comma-separated parts. */
function multiFromText(s: Steps, to: FieldLike, trimmed: string): Converted {
  const lower = Object.fromEntries(choicesOf(to.options).map((c) => [c.name.toLowerCase(), true]));
  const parts = s.add(
    when(
      `${jsonbLiteral(lower)} ? ${asciiLower(trimmed)}`,
      `array[${trimmed}]`,
      `array(select ${jsTrim("p.x")} from unnest(string_to_array(${trimmed}, ',')) with ordinality as p(x, i) where ${jsTrim("p.x")} <> '' order by p.i)`,
    ),
  );
  const ids = s.add(
    `array(select ${choiceIdSql(to, "p.x")} from unnest(${parts}) with ordinality as p(x, i) order by p.i)`,
  );
  const missing = `(select p.i - 1 from unnest(${ids}) with ordinality as p(x, i) where p.x is null order by p.i limit 1)`;
  return {
    value: distinct(ids),
    problem: `('item ' || ${missing} || ' is not a choice of this field')`,
    inNode: `not ${isAscii(trimmed)}`,
  };
}

// ---------------------------------------------------------------------------------------------
// Numbers: as doubles, as JavaScript has them. A double's `::text` is its shortest form, the
// digits JavaScript writes (`extra_float_digits` above 0, PostgreSQL's default; the caller's
// transaction sets it).

/** 2^1024 - 2^970: the least number a double rounds to infinity. */
const DOUBLE_OVERFLOW = (2n ** 1024n - 2n ** 970n).toString();
/** 2^-1075: the largest number a double rounds to zero. */
const DOUBLE_UNDERFLOW = `0.${(5n ** 1075n).toString().padStart(1075, "0")}`;
const NUMERIC_TEXT = "^[+-]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][+-]?[0-9]+)?$";

/** Text as `parseNumber` reads it (a numeric string of at most 400 characters), then `checkNumber`. */
function parseNumber(s: Steps, to: FieldLike, text: string): Converted {
  const numeric = s.add(`${text} ~ '${NUMERIC_TEXT}' and char_length(${text}) <= 400`);
  const exponent = s.add(
    when(numeric, `coalesce(substring(${text} from '[eE]([+-]?[0-9]+)$')::numeric, 0)`),
  );
  const zero = `${text} !~ '^[+-]?0*\\.?0*([eE]|$)'`;
  // The exact number, when its exponent is one numeric takes; past that, too large or too small.
  const exact = s.add(when(`${numeric} and abs(${exponent}) <= 1000`, `${text}::numeric`));
  const infinite = s.add(
    `${numeric} and ${zero} and (${exponent} > 1000 or abs(${exact}) >= ${DOUBLE_OVERFLOW})`,
  );
  const double = s.add(
    `(case when not ${numeric} or ${infinite} then null when ${exact} is null or abs(${exact}) <= ${DOUBLE_UNDERFLOW} then 0::float8 else ${exact}::float8 end)`,
  );
  const checked = checkNumber(s, to, double);
  return {
    value: checked.value,
    problem: `(case when not ${numeric} then 'must be a number' when ${infinite} then 'must be a finite number' else ${checked.problem} end)`,
  };
}

/** A double as `checkNumber` checks it: `roundTo` the field's decimals, min, max, exactness. */
function checkNumber(s: Steps, to: FieldLike, n: string): Converted {
  const { decimals, min, max } = numberSettingsOf(to);
  const scale = `1e${decimals}`;
  // roundTo: the shortest digits shifted by the decimals, to a double, rounded half up, back.
  const shifted = `(abs(${n})::text::numeric * ${scale})::float8`;
  const rounded = s.add(
    `(case when abs(${n}) >= 1e300 or abs(${n}) * ${scale}::float8 >= ${2 ** 53}::float8 then ${n} else sign(${n}) * (floor(${shifted}::text::numeric + 0.5) * 1e-${decimals})::float8 end)`,
  );
  const problems: string[] = [];
  if (min !== undefined) {
    problems.push(
      `when ${rounded} < ${String(min)}::float8 then ${sqlLiteral(`must be at least ${min}`)}`,
    );
  }
  if (max !== undefined) {
    problems.push(
      `when ${rounded} > ${String(max)}::float8 then ${sqlLiteral(`must be at most ${max}`)}`,
    );
  }
  const safe = Number.MAX_SAFE_INTEGER;
  problems.push(
    `when abs(${rounded}) > ${safe} then ${sqlLiteral(`must be between -${safe} and ${safe}, the largest numbers a number field keeps exactly`)}`,
  );
  // Significant digits: the shortest form's, without sign, exponent, point, leading or trailing zeros.
  const digits = `char_length(trim(both '0' from replace(regexp_replace(abs(${rounded})::text, 'e.*$', ''), '.', '')))`;
  problems.push(
    `when ${rounded} <> trunc(${rounded}) and ${digits} > ${EXACT_SIGNIFICANT_DIGITS} then ${sqlLiteral(
      `must have at most ${EXACT_SIGNIFICANT_DIGITS} significant digits once rounded to ` +
        `${decimals} decimal place${decimals === 1 ? "" : "s"} (or be a whole number): a number ` +
        "field keeps no more exactly",
    )}`,
  );
  return {
    value: `${rounded}::text::numeric`,
    problem: `(case ${problems.join(" ")} end)`,
  };
}

// ---------------------------------------------------------------------------------------------
// Dates

const DAYS_IN_MONTH = (y: string, m: string) =>
  `(case when ${m} = 2 then (case when ${y} % 4 = 0 and (${y} % 100 <> 0 or ${y} % 400 = 0) then 29 else 28 end) when ${m} in (4, 6, 9, 11) then 30 else 31 end)`;
const storableDate = (y: string, m: string, d: string) =>
  `(${y} between 1 and 9999 and ${m} between 1 and 12 and ${d} between 1 and ${DAYS_IN_MONTH(y, m)})`;

function checkDate(s: Steps, text: string): Converted {
  const parts = s.add(`regexp_match(${text}, '^([0-9]{4})-([0-9]{2})-([0-9]{2})$')::int[]`);
  const valid = storableDate(`${parts}[1]`, `${parts}[2]`, `${parts}[3]`);
  return {
    value: when(valid, `${text}::date`),
    problem: `(case when ${parts} is null then 'must be a date string YYYY-MM-DD' when not ${valid} then 'must be a real calendar date (years 1-9999)' end)`,
  };
}

const DATETIME =
  "^([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})(\\.[0-9]{1,9})?([Zz]|([+-])([0-9]{2}):([0-9]{2}))$";

/** An RFC 3339 date-time as `parseDatetime` reads it (milliseconds kept, not rounded), in years 1-9999. */
function checkDatetime(s: Steps, text: string): Converted {
  const m = s.add(`regexp_match(${text}, '${DATETIME}')`);
  const int = (i: number) => `${m}[${i}]::int`;
  const valid = `(${m} is not null and ${storableDate(int(1), int(2), int(3))} and ${int(4)} <= 23 and ${int(5)} <= 59 and ${int(6)} <= 59 and coalesce(${int(10)} <= 23 and ${int(11)} <= 59, true))`;
  const millis = `coalesce(rpad(substr(${m}[7], 2, 3), 3, '0')::int, 0)`;
  const offset = `coalesce((${m}[9] || '1')::int * (${int(10)} * 60 + ${int(11)}), 0)`;
  const at = s.add(
    when(
      valid,
      `make_timestamptz(${int(1)}, ${int(2)}, ${int(3)}, ${int(4)}, ${int(5)}, ${int(6)} + ${millis} / 1000.0, 'UTC') - make_interval(mins => ${offset})`,
    ),
  );
  const inYears = `${at} >= '0001-01-01T00:00:00Z'::timestamptz and ${at} < '10000-01-01T00:00:00Z'::timestamptz`;
  return {
    value: when(inYears, at),
    problem: `(case when not ${valid} then 'must be an RFC 3339 date-time such as 2026-11-21T10:15:00Z' when not (${inYears}) then 'must lie in the years 1-9999 (UTC)' end)`,
  };
}

// ---------------------------------------------------------------------------------------------
// E-mails, URLs, phone numbers (checked as ASCII here; Node judges the rest)

const EMAIL_LOCAL = "^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*$";
const DOMAIN =
  "^([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\\.)+([A-Za-z]{2,63}|[Xx][Nn]--[A-Za-z0-9-]{0,58}[A-Za-z0-9])$";
/** URLs the WHATWG parser surely takes as they are: a host name of letters, digits and hyphens
 * ending in a label that starts with a letter (no IPv4 address, no punycode), no user, a port
 * of at most 4 digits, printable ASCII after. */
const PLAIN_URL =
  "^[Hh][Tt][Tt][Pp][Ss]?://([A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?\\.)*[A-Za-z]([A-Za-z0-9-]*[A-Za-z0-9])?(:[0-9]{1,4})?([/?#][!-~]*)?$";
const PHONE_EXTENSION = `${ASCII_SPACE}*([Xx]|[Ee][Xx][Tt]\\.?|#)${ASCII_SPACE}*[0-9]{1,6}$`;

function checkTextual(s: Steps, type: "email" | "url" | "phone", raw: string): Converted {
  const text = s.add(jsTrim(raw));
  const inNode = `not ${isAscii(text)}`;
  const q = (pattern: string) => sqlLiteral(pattern);
  switch (type) {
    case "email": {
      const message = "'must be an e-mail address such as ada@example.com'";
      const local = `substring(${text} from '^(.*)@')`;
      const domain = `substring(${text} from '@([^@]*)$')`;
      return {
        value: text,
        problem: `(case when char_length(${text}) > ${EMAIL_MAX_LENGTH} then ${sqlLiteral(`must be at most ${EMAIL_MAX_LENGTH} characters`)} when coalesce(${local}, '') = '' or char_length(${local}) > ${EMAIL_LOCAL_MAX_LENGTH} or ${local} !~ ${q(EMAIL_LOCAL)} or char_length(${domain}) > 253 or ${domain} !~ ${q(DOMAIN)} then ${message} end)`,
        inNode,
      };
    }
    case "url":
      return {
        value: text,
        problem: `(case when char_length(${text}) > ${URL_MAX_LENGTH} then ${sqlLiteral(`must be at most ${URL_MAX_LENGTH} characters`)} when ${text} ~ '[\\x01-\\x20\\x7f]' then 'must not contain spaces' end)`,
        inNode: `(${inNode} or (char_length(${text}) <= ${URL_MAX_LENGTH} and ${text} !~ '[\\x01-\\x20\\x7f]' and (${text} !~ ${q(PLAIN_URL)} or ${text} ~ '[/.][Xx][Nn]--')))`,
      };
    case "phone": {
      // `(.*?)` before an extension: no line ends (JavaScript's `.`).
      const prefix = `regexp_replace(${text}, ${q(PHONE_EXTENSION)}, '')`;
      const main = s.add(
        when(`${text} ~ ${q(PHONE_EXTENSION)} and ${prefix} !~ '[\\n\\r]'`, prefix, text),
      );
      const digits = `char_length(regexp_replace(${main}, '[^0-9]', '', 'g'))`;
      return {
        value: text,
        problem: `(case when char_length(${text}) > ${PHONE_MAX_LENGTH} then ${sqlLiteral(`must be at most ${PHONE_MAX_LENGTH} characters`)} when ${main} !~ ${q(`^\\+?[0-9 \t\n\v\f\r()./-]+$`)} then 'must be a phone number: digits, spaces, ( ) . - /, a leading + and an extension' when ${digits} not between 3 and 20 then 'must have 3-20 digits' end)`,
        inNode,
      };
    }
  }
}
