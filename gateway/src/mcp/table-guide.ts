import type { FieldTypeName } from "@rowbase/kit/field-types";

/** What the guide reads of a field: as `/table/get` presents it. */
export interface GuideField {
  name: string;
  type: FieldTypeName;
  options: Record<string, unknown>;
}

/** A field name as a reference in `where`, `sort` and `fields`: quoted when it must be. */
function reference(name: string): string {
  // All digits would be read as a field id; a comma, parenthesis, quote or tilde as syntax.
  if (/^[0-9]+$/.test(name) || /[,()"~]/.test(name) || name.trim() !== name) {
    return `"${name.replaceAll('"', '""')}"`;
  }
  return name;
}

/** A value in a condition, quoted when it holds what would end it. */
function value(text: string): string {
  return /[,()"]/.test(text) || text.trim() !== text ? `"${text.replaceAll('"', '""')}"` : text;
}

function choicesOf(field: GuideField): string[] {
  const choices = field.options.choices;
  if (!Array.isArray(choices)) return [];
  return choices.flatMap((choice) =>
    typeof choice === "object" && choice !== null && typeof choice.name === "string"
      ? [choice.name as string]
      : [],
  );
}

/**
 * One condition that fits the field's type, written with its own name and (for selects) its
 * own choices; none for the types no condition can test (files).
 */
export function exampleCondition(field: GuideField): string | undefined {
  const ref = reference(field.name);
  const choices = choicesOf(field);
  switch (field.type) {
    case "text":
    case "long_text":
    case "email":
    case "url":
    case "phone":
      return `(${ref},like,${value("abc")})`;
    case "number":
    case "autonumber":
      return `(${ref},gte,10)`;
    case "boolean":
      return `(${ref},checked)`;
    case "date":
      return `(${ref},gte,daysAgo:30)`;
    case "datetime":
    case "created_at":
    case "updated_at":
      return `(${ref},gte,2026-01-01T00:00:00Z)`;
    case "single_select":
      return choices.length > 0
        ? `(${ref},in,${choices.slice(0, 2).map(value).join(",")})`
        : `(${ref},notblank)`;
    case "multi_select":
      return choices.length > 0 ? `(${ref},anyof,${value(choices[0] as string)})` : undefined;
    case "json":
    case "link":
    case "lookup":
    case "rollup":
      return `(${ref},notblank)`;
    case "file":
      return undefined;
  }
}

/** Operators by the kind of value they test, as the query language takes them. */
const OPERATOR_LINES = [
  "Text, numbers, dates and datetimes: eq, neq, gt, gte, lt, lte, btw (two values, inclusive), in, nin (comma lists), blank, notblank; text also like, nlike (case-insensitive substring).",
  "single_select: eq, neq, in, nin, anyof, nanyof, like, nlike, blank, notblank. multi_select: anyof, allof, nanyof (comma lists), blank, notblank.",
  "boolean: checked, notchecked, eq, neq, blank, notblank. json: blank, notblank. File fields cannot be filtered.",
  "link: has, hasnot (a row id), blank, notblank. lookup: the operators of the looked-up field, true when any linked value matches (neq, nlike, nanyof: when none does). rollup: the operators of its number or date.",
  "Dates and datetimes also take today, yesterday, tomorrow, daysAgo:N, daysFromNow:N (UTC).",
];

/**
 * A short guide to `where`, `sort` and `fields` for a model, with examples written with this
 * table's own field names and choices. Every example is a valid argument of `list_records` on
 * this table (the MCP tests run each one).
 */
export function tableGuide(fields: readonly GuideField[]): {
  text: string;
  examples: { where: string[]; sort: string; fields: string };
} {
  // Selects first: their choices are what a model cannot guess.
  const selectsFirst = [...fields].sort(
    (a, b) => Number(!a.type.endsWith("select")) - Number(!b.type.endsWith("select")),
  );
  const conditions = selectsFirst.flatMap((field) => {
    const condition = exampleCondition(field);
    return condition ? [condition] : [];
  });
  const where = [...conditions.slice(0, 5)];
  if (conditions.length >= 2) where.push(`${conditions[0]}~and${conditions[1]}`);
  if (conditions.length >= 3) {
    where.push(`${conditions[0]}~and(${conditions[1]}~or~not${conditions[2]})`);
  }
  const sortable = fields.filter((field) => field.type !== "file" && field.type !== "json");
  const sort = [
    ...sortable
      .slice(0, 2)
      .map((field, index) => `${index === 0 ? "-" : ""}${reference(field.name)}`),
    "created_at",
  ].join(",");
  const shown = fields
    .slice(0, 3)
    .map((field) => reference(field.name))
    .join(",");
  const lines = [
    'where: a filter of conditions (Field,operator,value), joined with ~and and ~or (~and binds tighter), negated with ~not, grouped with parentheses. A field is named by its name or its id; a value holding a comma or parenthesis is double-quoted ("" for a quote). At most 50 conditions, 10 levels deep, 4096 characters. A filter that does not parse is refused with the position of the problem.',
    ...OPERATOR_LINES,
    ...(where.length > 0 ? [`Examples on this table: ${where.join("  |  ")}`] : []),
    `sort: comma-separated fields, - before one for descending; row_id, created_at and updated_at too; ties break by row_id; nulls last ascending. Example: ${sort}`,
    ...(shown
      ? [`fields: comma-separated fields, the only keys of each record's data. Example: ${shown}`]
      : []),
  ];
  return { text: lines.join("\n"), examples: { where, sort, fields: shown } };
}
