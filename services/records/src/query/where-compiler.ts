import { formatDay, formatInstant } from "./calendar.js";
import { type QueryField, type ReferenceTarget, resolveReference } from "./field-reference.js";
import {
  type Parsed,
  parseBooleanValue,
  parseDatetimeValue,
  parseDateValue,
  parseIntegerValue,
  parseNumberValue,
  type TimeSpan,
} from "./filter-value.js";
import { QueryError, quoteForMessage } from "./query-error.js";
import { type ParamType, SqlParams } from "./sql-params.js";
import { type Storage, type ValueKind, type ValueSource, valueSource } from "./value-expression.js";
import type { ConditionNode, Literal, Operator, WhereNode } from "./where-ast.js";
import { parseWhere } from "./where-parser.js";

export interface CompileOptions {
  /** Parameters the caller's SQL already uses: the first placeholder here is `$(paramOffset+1)`. */
  paramOffset: number;
  /** The moment relative dates count from, in UTC (one per request). */
  now: Date;
  /** Qualifies the record's columns (`r.data`, `r.row_id`) when the statement needs it. */
  tableAlias?: string;
  /** How the records are stored (`jsonb` unless said): what the SQL reads a value from. */
  storage?: Storage;
}

/** A parameterised piece of SQL: user text is only ever in `params`. */
export interface SqlFragment {
  sql: string;
  params: unknown[];
}

/**
 * A compiled `where`: its SQL, whether it reads a field of `data` or only columns, and the ids
 * of the fields it reads, in the order it names them first.
 */
export interface CompiledWhere extends SqlFragment {
  readsData: boolean;
  fieldIds: string[];
  /**
   * The fields that conditions ANDed at the top level compare for equality (`eq`, `in`) and
   * by range (`gt`, `gte`, `lt`, `lte`, `btw`), in the order named: what one index of two
   * columns can serve (`indexes.ts`); `exact`, the equalities of one value (`eq`), after which
   * such an index keeps its second column in order. Empty for a filter whose top level is an OR
   * or a NOT.
   */
  conjuncts: { equalities: string[]; ranges: string[]; exact: string[] };
}

const EQUALITIES: ReadonlySet<Operator> = new Set(["eq", "in"]);
const RANGES: ReadonlySet<Operator> = new Set(["gt", "gte", "lt", "lte", "btw"]);

/** `CompiledWhere.conjuncts` of a parsed, compiled `where`. */
function conjunctsOf(node: WhereNode, fields: readonly QueryField[]): CompiledWhere["conjuncts"] {
  const conjuncts = { equalities: [] as string[], ranges: [] as string[], exact: [] as string[] };
  const visit = (at: WhereNode) => {
    if (at.kind === "and") for (const operand of at.operands) visit(operand);
    if (at.kind !== "condition") return;
    const target = resolveReference(at.ref.text, fields, { systemColumns: true });
    if (target?.kind !== "field") return;
    if (at.operator === "eq") conjuncts.exact.push(target.field.id);
    if (EQUALITIES.has(at.operator)) conjuncts.equalities.push(target.field.id);
    else if (RANGES.has(at.operator)) conjuncts.ranges.push(target.field.id);
  };
  visit(node);
  return conjuncts;
}

const COMPARISONS: readonly Operator[] = [
  "eq",
  "neq",
  "gt",
  "gte",
  "lt",
  "lte",
  "btw",
  "in",
  "nin",
  "blank",
  "notblank",
];

/** Which operators fit which values; any other pairing is a 400. */
const OPERATORS_BY_KIND: Readonly<Record<ValueKind, ReadonlySet<Operator>>> = {
  text: new Set([...COMPARISONS, "like", "nlike"]),
  single_select: new Set([
    "eq",
    "neq",
    "in",
    "nin",
    "anyof",
    "nanyof",
    "like",
    "nlike",
    "blank",
    "notblank",
  ]),
  multi_select: new Set(["anyof", "allof", "nanyof", "blank", "notblank"]),
  number: new Set(COMPARISONS),
  row_id: new Set(COMPARISONS),
  date: new Set(COMPARISONS),
  datetime: new Set(COMPARISONS),
  boolean: new Set(["eq", "neq", "checked", "notchecked", "blank", "notblank"]),
  json: new Set(["blank", "notblank"]),
  // A link: whether it links a record (by row id), or any.
  link: new Set(["has", "hasnot", "blank", "notblank"]),
  // A file field's value lives in the files service, not in `data`: nothing here can test it.
  file: new Set(),
};

/** Each negative operator is exactly the complement of its positive one. */
const NEGATED: ReadonlyMap<Operator, Operator> = new Map<Operator, Operator>([
  ["neq", "eq"],
  ["nlike", "like"],
  ["nin", "in"],
  ["nanyof", "anyof"],
  ["notchecked", "checked"],
  ["notblank", "blank"],
  ["hasnot", "has"],
]);

const SYMBOL = { gt: ">", gte: ">=", lt: "<", lte: "<=" } as const;

/** Dates and datetimes written in the stored form (`STORED_SHAPE`), with four-digit years. */
const STORED_FORM = {
  date: /^[0-9]{4}-[0-9]{2}-[0-9]{2}$/,
  datetime: /^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$/,
};
type Inequality = keyof typeof SYMBOL;

/**
 * Compiles a parsed `where` against the table's fields into a boolean SQL expression over
 * `record(row_id, data, created_at, updated_at)`, to be ANDed with the caller's own conditions.
 *
 * Semantics (as Airtable's filters):
 * - Blank is a missing key, JSON null, "" or []. A value of the wrong JSON type (which the write
 *   path never stores) counts as not blank but matches no comparison.
 * - Positive operators (eq, gt, ..., like, in, anyof, allof, checked) never match a blank value.
 *   Negative ones (neq, nlike, nin, nanyof, notchecked, notblank) are exactly their complement,
 *   so `(Status,neq,Done)` includes the records with no Status, and `~not X` is the complement
 *   of X. Every condition compiles to TRUE or FALSE, never NULL, so NOT and OR behave.
 * - eq is exact (case-sensitive), like/nlike is a case-insensitive substring (both sides
 *   upper-cased by ICU's root locale) with `%`, `_` and `\` taken literally, gt/lt on text
 *   compare code points (COLLATE "C"), the same on every server whatever its locale.
 * - Dates compare as days. On a datetime field a date-time value names its millisecond and a
 *   date (or today, daysAgo:N, ...) names its whole UTC day: `(At,eq,today)` is any time today,
 *   `(At,lte,2026-01-31)` includes all of 31 January.
 * - A created_at / updated_at field reads the record's own column.
 * - On the per-table storage (`relationalSource`): a link takes `has` / `hasnot` (a row id) and
 *   blank (no links); a lookup the operators of the field it looks up, holding when any linked
 *   value does (its negative operators when none does), blank when it has no value; a rollup
 *   those of its value (a number, a date or a datetime).
 */
export function compileWhere(
  node: WhereNode,
  fields: readonly QueryField[],
  options: CompileOptions,
): CompiledWhere {
  const compiler = new WhereCompiler(fields, options);
  const sql = compiler.compile(node);
  return {
    sql,
    params: compiler.params.values,
    readsData: compiler.readsData,
    fieldIds: [...compiler.fieldIds],
    conjuncts: conjunctsOf(node, fields),
  };
}

/** `parseWhere` then `compileWhere`. */
export function buildWhere(
  text: string,
  fields: readonly QueryField[],
  options: CompileOptions,
): CompiledWhere {
  return compileWhere(parseWhere(text), fields, options);
}

function describe(target: ReferenceTarget): string {
  return target.kind === "field"
    ? `${target.field.type} field ${quoteForMessage(target.field.name)}`
    : `the column ${target.column}`;
}

function fail(
  reason: string,
  position: number,
  code: "not_found" | "invalid_syntax" = "invalid_syntax",
): QueryError {
  return new QueryError("where", reason, position, code);
}

function parsedOrFail<T>(parsed: Parsed<T>, literal: Literal): T {
  if (parsed.ok) return parsed.value;
  throw fail(`${quoteForMessage(literal.text)} ${parsed.message}`, literal.position);
}

/** A compared value: its parameter, the parameter's type and its JSON form for `data @>`. */
interface Scalar {
  value: string;
  type: "text" | "numeric" | "bigint" | "date";
  json: string | undefined;
}

const jsonEntry = (fieldId: string, value: string) => `{${JSON.stringify(fieldId)}:${value}}`;

/** The stored spelling of a choice: exact, else regardless of case, else the text as given. */
function choiceName(source: ValueSource, text: string): string {
  if (!source.choices || source.choices.includes(text)) return text;
  const lower = text.toLowerCase();
  return source.choices.find((choice) => choice.toLowerCase() === lower) ?? text;
}

/**
 * What a select's column holds for a choice named `text` (`choiceName`'s choice): its id, or ""
 * for a name that is no choice, which no column holds, so that it matches nothing.
 */
function choiceId(source: ValueSource, text: string): string {
  const index = source.choices?.indexOf(choiceName(source, text)) ?? -1;
  return index < 0 ? "" : (source.choiceIds?.[index] ?? "");
}

/** A span as a tstzrange literal; `from < to` always, so PostgreSQL accepts it. */
function rangeLiteral(span: TimeSpan): string {
  return `["${formatInstant(span.from)}","${formatInstant(span.to)}")`;
}

function likePattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, "\\$&")}%`;
}

/**
 * A text as like/nlike compare it: upper-cased by ICU's root locale, whatever the database's
 * collation (ILIKE folds by it, ASCII only under locale C). Upper, not ILIKE's lower: Unicode's
 * lower-casing turns a Σ at a word's end into ς, so under ILIKE the pattern `%ΟΔΥΣ%` would not
 * find "ΟΔΥΣΣΕΥΣ"; upper-casing looks at no neighbour, so a substring stays a substring, and
 * it maps σ, ς and Σ alike (and ß to SS), as Unicode's case folding does. It leaves `%`, `_`
 * and `\` as they are, so the pattern's escapes hold. The migration `IcuCollation` checks that
 * the database can use the collation.
 */
const caseless = (text: string) => `upper(${text} COLLATE "und-x-icu")`;

/**
 * A value as `eq` and `in` compare it. A text column is compared in `COLLATE "C"`, the
 * collation of the expression its index is built on (`fieldIndexExpression`), so that the index
 * serves equality too; the answer is the same, since equality under a deterministic collation
 * is equality of the text.
 */
function equalityOperand(source: ValueSource): string {
  return source.storage === "columns" && source.kind === "text"
    ? `${source.typed} COLLATE "C"`
    : source.typed;
}

class WhereCompiler {
  readonly params: SqlParams;
  /** Whether a condition reads a field of `data` (not only `row_id` and the timestamps). */
  readsData = false;
  /** The fields the conditions read, in the order they are first named. */
  readonly fieldIds = new Set<string>();

  constructor(
    private readonly fields: readonly QueryField[],
    private readonly options: CompileOptions,
  ) {
    if (Number.isNaN(options.now.getTime())) throw new Error("now must be a valid Date");
    this.params = new SqlParams(options.paramOffset);
  }

  compile(node: WhereNode): string {
    switch (node.kind) {
      case "condition":
        return this.condition(node);
      case "not":
        return `(NOT ${this.compile(node.operand)})`;
      case "and":
        return `(${node.operands.map((operand) => this.compile(operand)).join(" AND ")})`;
      case "or":
        return `(${node.operands.map((operand) => this.compile(operand)).join(" OR ")})`;
    }
  }

  private condition(node: ConditionNode): string {
    const target = resolveReference(node.ref.text, this.fields, { systemColumns: true });
    if (!target) {
      throw fail(`unknown field ${quoteForMessage(node.ref.text)}`, node.ref.position, "not_found");
    }
    const source = valueSource(target, this.options.tableAlias, this.options.storage);
    if (source.readsField) this.readsData = true;
    if (target.kind === "field") this.fieldIds.add(target.field.id);
    if (!OPERATORS_BY_KIND[source.kind].has(node.operator)) {
      throw fail(
        `operator '${node.operator}' does not apply to ${describe(target)}`,
        node.operatorPosition,
      );
    }
    const positive = NEGATED.get(node.operator);
    if (positive) return `(NOT ${this.holds(source, positive, node)})`;
    return this.holds(source, node.operator, node);
  }

  /**
   * A positive operator, on a lookup for any of its values: EXISTS a linked record whose value
   * satisfies it (so its negative holds when none does), and blank when none holds a value.
   */
  private holds(source: ValueSource, operator: Operator, node: ConditionNode): string {
    if (!source.lookup || operator === "blank") return this.positive(source, operator, node);
    const { from, inner } = source.lookup;
    return `(EXISTS (select 1 ${from} and ${this.positive(inner, operator, node)}))`;
  }

  /** A positive operator: TRUE or FALSE, and FALSE for a blank value (blank aside). */
  private positive(source: ValueSource, operator: Operator, node: ConditionNode): string {
    const single = () => {
      if (node.value.kind !== "single") throw new Error(`operator ${operator} without its value`);
      return node.value.value;
    };
    const items = () => {
      if (node.value.kind !== "list") throw new Error(`operator ${operator} without its list`);
      return node.value.items;
    };
    switch (operator) {
      case "blank":
        return source.blank;
      case "checked":
        if (source.storage === "columns") return this.orFalse(source, `${source.typed} = true`);
        return this.contains(source, "true");
      case "eq":
        return this.equals(source, single());
      case "in":
        return this.oneOf(source, items());
      case "gt":
      case "gte":
      case "lt":
      case "lte":
        return this.inequality(source, operator, single());
      case "btw":
        return this.between(source, items() as [Literal, Literal]);
      case "like": {
        const text = this.selectName(source) ?? source.typed;
        const pattern = this.params.add(likePattern(single().text), "text");
        return this.orFalse(source, `${caseless(text)} LIKE ${caseless(pattern)}`);
      }
      case "anyof":
        return this.anyOf(source, items());
      case "has": {
        const link = source.link;
        if (!link) throw new Error("has without a link");
        const rowId = parsedOrFail(parseIntegerValue(single().text), single());
        const param = this.params.add(rowId, "bigint");
        return `(EXISTS (select 1 ${link.from} and ${link.linked} = ${param}))`;
      }
      case "allof": {
        if (source.storage === "columns") {
          const ids = items().map((item) => choiceId(source, item.text));
          return this.orFalse(source, `${source.typed} @> ${this.params.add(ids, "text[]")}`);
        }
        const names = items().map((item) => choiceName(source, item.text));
        return this.contains(source, JSON.stringify(names));
      }
      default:
        throw new Error(`operator ${operator} is not a positive operator`);
    }
  }

  /**
   * A comparison as TRUE or FALSE: NULL (a blank or malformed value) becomes FALSE, so that NOT
   * gives exactly the complement. A value that is never NULL (`row_id`) is compared bare, which
   * lets PostgreSQL use the `(table_id, row_id)` index for it; a column's comparison is ANDed
   * with the column being there (as exact as `coalesce`, and a condition the indexes of
   * `created_at` and `updated_at` serve, which `coalesce` is not).
   */
  private orFalse(source: ValueSource, comparison: string): string {
    if (!source.nullable) return comparison;
    if (source.fieldId === undefined && !source.computed) {
      return `(${comparison} AND ${source.typed} IS NOT NULL)`;
    }
    return `coalesce(${comparison}, false)`;
  }

  /**
   * `data @> {"id": json}`: exact JSON equality of the stored value. Never NULL (`data` is NOT
   * NULL, the JSON is ours), and bare, so that the GIN index on `data` can serve it.
   */
  private contains(source: ValueSource, json: string): string {
    const param = this.params.add(jsonEntry(source.fieldId!, json), "jsonb");
    return `${source.data} @> ${param}`;
  }

  /** `data @> ANY(...)`: one of several `contains`, bare like it. */
  private containsAny(source: ValueSource, entries: string[]): string {
    return `${source.data} @> ANY(${this.params.add(entries, "jsonb[]")})`;
  }

  /**
   * A single select's choice name, in column storage (whose column holds the choice's id), as
   * SQL over two parameters: the names, picked by the id's place among the ids. Undefined for
   * any other value.
   */
  private selectName(source: ValueSource): string | undefined {
    if (source.storage !== "columns" || source.kind !== "single_select") return undefined;
    const names = this.params.add(source.choices ?? [], "text[]");
    const ids = this.params.add(source.choiceIds ?? [], "text[]");
    return `(${names})[array_position(${ids}, ${source.typed})]`;
  }

  private equals(source: ValueSource, literal: Literal): string {
    if (source.kind === "datetime") return this.within(source, this.span(literal));
    if (source.kind === "boolean") {
      const value = parsedOrFail(parseBooleanValue(literal.text), literal);
      if (source.storage === "columns") {
        return this.orFalse(source, `${source.typed} = ${this.params.add(value, "boolean")}`);
      }
      return this.contains(source, String(value));
    }
    const scalar = this.scalar(source, literal);
    if (source.fieldId !== undefined && scalar.json !== undefined) {
      return this.contains(source, scalar.json);
    }
    return this.orFalse(
      source,
      `${equalityOperand(source)} = ${this.params.add(scalar.value, scalar.type)}`,
    );
  }

  private oneOf(source: ValueSource, items: Literal[]): string {
    if (source.kind === "datetime") {
      const spans = items.map((item) => this.span(item));
      const inSpans = () =>
        `${source.typed} <@ ANY(${this.params.add(spans.map(rangeLiteral), "tstzrange[]")})`;
      // Only the values within the spans' hull are checked against each span.
      const from = Math.min(...spans.map((span) => span.from));
      const to = Math.max(...spans.map((span) => span.to));
      return this.range(
        source,
        [
          { symbol: ">=", value: formatInstant(from) },
          { symbol: "<", value: formatInstant(to) },
        ],
        inSpans,
      );
    }
    const scalars = items.map((item) => this.scalar(source, item));
    if (source.fieldId !== undefined && scalars.every((s) => s.json !== undefined)) {
      const entries = scalars.map((s) => jsonEntry(source.fieldId!, s.json!));
      return this.containsAny(source, entries);
    }
    const type = `${scalars[0]!.type}[]` as ParamType;
    const param = this.params.add(
      scalars.map((s) => s.value),
      type,
    );
    return this.orFalse(source, `${equalityOperand(source)} = ANY(${param})`);
  }

  private anyOf(source: ValueSource, items: Literal[]): string {
    if (source.kind === "single_select") return this.oneOf(source, items);
    if (source.storage === "columns") {
      const ids = items.map((item) => choiceId(source, item.text));
      return this.orFalse(source, `${source.typed} && ${this.params.add(ids, "text[]")}`);
    }
    // A multi_select holds one of them: its array contains that one-item array.
    const entries = items.map((item) =>
      jsonEntry(source.fieldId!, JSON.stringify([choiceName(source, item.text)])),
    );
    return this.containsAny(source, entries);
  }

  private inequality(source: ValueSource, operator: Inequality, literal: Literal): string {
    if (source.kind === "datetime") {
      const span = this.span(literal);
      // A span [from, to): after it is >= to, up to its end is < to.
      const bound = operator === "gt" || operator === "lte" ? span.to : span.from;
      const symbol = operator === "gt" || operator === "gte" ? ">=" : "<";
      return this.range(source, [{ symbol, value: formatInstant(bound) }]);
    }
    if (source.kind === "date") {
      return this.range(source, [{ symbol: SYMBOL[operator], value: this.day(literal) }]);
    }
    const scalar = this.scalar(source, literal);
    if (source.kind === "number" && source.fieldId !== undefined) {
      return this.numberPath(source, [`@ ${SYMBOL[operator]} ${scalar.value}`]);
    }
    const param = this.params.add(scalar.value, scalar.type);
    const left = source.kind === "text" ? `${source.typed} COLLATE "C"` : source.typed;
    return this.orFalse(source, `${left} ${SYMBOL[operator]} ${param}`);
  }

  /** Inclusive at both ends; a low end above the high end matches nothing. */
  private between(source: ValueSource, [low, high]: [Literal, Literal]): string {
    if (source.kind === "datetime") {
      return this.range(source, [
        { symbol: ">=", value: formatInstant(this.span(low).from) },
        { symbol: "<", value: formatInstant(this.span(high).to) },
      ]);
    }
    if (source.kind === "date") {
      return this.range(source, [
        { symbol: ">=", value: this.day(low) },
        { symbol: "<=", value: this.day(high) },
      ]);
    }
    const [a, b] = [this.scalar(source, low), this.scalar(source, high)];
    if (source.kind === "number" && source.fieldId !== undefined) {
      return this.numberPath(source, [`@ >= ${a.value}`, `@ <= ${b.value}`]);
    }
    const left = source.kind === "text" ? `${source.typed} COLLATE "C"` : source.typed;
    const [from, to] = [this.params.add(a.value, a.type), this.params.add(b.value, b.type)];
    return this.orFalse(source, `${left} BETWEEN ${from} AND ${to}`);
  }

  /**
   * A number field's comparisons (`@ >= 500`, all must hold) as one SQL/JSON path over `data`:
   * `strict $."id" ? (...)`, which holds only for a JSON number (strict: an array is not
   * unwrapped, a string or null compares to nothing) and is NULL for a missing key (an error
   * the silent call turns into NULL). The same answers as comparing `typed`, without its type
   * check and second read of the value for every record: a range over 33,000 records takes
   * about 4 ms less. The numbers are `parseNumberValue`'s finite doubles,
   * written by `String`, which the path's grammar reads (`1e+21`, `-1.5e-7`); the path is one
   * parameter, and the function form (not `@?`) keeps the GIN index from being tried for it.
   */
  private numberPath(source: ValueSource, conditions: readonly string[]): string {
    const path = `strict $."${source.fieldId}" ? (${conditions.join(" && ")})`;
    const param = this.params.add(path, "jsonpath");
    return this.orFalse(source, `jsonb_path_exists(${source.data}, ${param}, '{}', true)`);
  }

  private within(source: ValueSource, span: TimeSpan): string {
    return this.range(source, [
      { symbol: ">=", value: formatInstant(span.from) },
      { symbol: "<", value: formatInstant(span.to) },
    ]);
  }

  /**
   * A date's or datetime's comparisons with `bounds` (all must hold), exactly as `typed` would
   * answer them but without paying its check for every record: a value of `data` in the stored
   * form's shape is compared as text, as are bounds in that form (code point order is the
   * days' and instants' order), and only when that holds checked to be a real day or instant
   * (`typed`'s regular expression, about 1 µs a value, so a range filter pays it for the
   * values in range only); any other value, a column, or a bound outside the years 0000-9999
   * goes through `typed`. With `exact` (a condition on `typed`, adding its parameters on each
   * call), the bounds only narrow down the values that `exact` then decides.
   */
  private range(
    source: ValueSource,
    bounds: readonly { symbol: string; value: string }[],
    exact?: () => string,
  ): string {
    const kind = source.kind === "date" ? "date" : "datetime";
    const compare = (value: string, type: ParamType) =>
      bounds
        .map((bound) => `${value} ${bound.symbol} ${this.params.add(bound.value, type)}`)
        .join(" AND ");
    const typedType = kind === "date" ? "date" : "timestamptz";
    const { stored } = source;
    if (!stored || !bounds.every((bound) => STORED_FORM[kind].test(bound.value))) {
      return this.orFalse(source, exact ? exact() : compare(source.typed, typedType));
    }
    // In this order: the placeholders are numbered as they are added.
    const asText = compare(`${stored.text} COLLATE "C"`, "text");
    const checked = exact ? exact() : `${source.typed} IS NOT NULL`;
    const typed = exact ? exact() : compare(source.typed, typedType);
    return this.orFalse(
      source,
      `(CASE WHEN ${stored.text} LIKE '${stored.shape}' THEN ${asText} AND ${checked} ELSE ${typed} END)`,
    );
  }

  /** A date literal as the day it names, in the stored form. */
  private day(literal: Literal): string {
    return formatDay(parsedOrFail(parseDateValue(literal.text, this.options.now), literal));
  }

  private span(literal: Literal): TimeSpan {
    return parsedOrFail(parseDatetimeValue(literal.text, this.options.now), literal);
  }

  private scalar(source: ValueSource, literal: Literal): Scalar {
    switch (source.kind) {
      case "number": {
        const n = parsedOrFail(parseNumberValue(literal.text), literal);
        return { value: String(n), type: "numeric", json: JSON.stringify(n) };
      }
      case "row_id": {
        const value = parsedOrFail(parseIntegerValue(literal.text), literal);
        return { value, type: "bigint", json: undefined };
      }
      case "date": {
        // A stored date is its day's only text (the stored form), so equality is containment.
        const day = this.day(literal);
        return { value: day, type: "date", json: JSON.stringify(day) };
      }
      case "text":
        return { value: literal.text, type: "text", json: JSON.stringify(literal.text) };
      case "single_select": {
        if (source.storage === "columns") {
          return { value: choiceId(source, literal.text), type: "text", json: undefined };
        }
        const name = choiceName(source, literal.text);
        return { value: name, type: "text", json: JSON.stringify(name) };
      }
      default:
        throw new Error(`no scalar values for ${source.kind}`);
    }
  }
}
