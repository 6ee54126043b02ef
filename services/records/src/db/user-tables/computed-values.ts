import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { SchemaField } from "@rowbase/kit";
import { computedOptionsOf, type FieldLike, linkOptionsOf } from "@rowbase/kit/field-types";
import { queryFieldsOf } from "../../domain/query-fields.js";
import type { FieldRelation, LinkPath, QueryField } from "../../query/index.js";
import {
  LINKED_ALIAS,
  linkedFrom,
  linkedValue,
  rollupAggregate,
} from "../../query/relational-source.js";
import { type ColumnType, columnRead, columnValue } from "./columns.js";
import type { LinkedSchemas } from "./link-values.js";
import { fieldColumn, linkJunction, userTable } from "./names.js";

/**
 * Lookups and rollups on the per-table storage: computed in the statement that reads the records
 * (a page, a read by id), never stored and never a query per record. Each is a correlated
 * subquery over the link's junction joined to the linked user table, through the junction's
 * index that leads with the record's own side (`linkedFrom`): for a page, PostgreSQL runs it for
 * the page's rows only. A lookup is the array of the looked-up field's non-blank values across the
 * linked records, by linked row id, `[]` for none; a rollup one value (`rollupAggregate`). A
 * lookup or rollup whose link, inverse or looked-up field is not in the schemas (deleted
 * mid-flight) reads `[]` or null, as does a lookup of a field with no value to look up.
 */

/** A link field's junction and linked table, or undefined when it has no inverse yet. */
export function linkPathOf(organizationId: bigint, field: SchemaField): LinkPath | undefined {
  const options = linkOptionsOf(field.options);
  if (field.type !== "link" || !options?.inverseFieldId) return undefined;
  const junction = linkJunction(organizationId, BigInt(field.id), options.inverseFieldId);
  return {
    junction: junction.relation,
    own: junction.own,
    other: junction.other,
    table: userTable(organizationId, options.tableId),
  };
}

/**
 * How a link's, lookup's or rollup's values are reached (`QueryField.relation`); undefined for
 * another field, or one whose link or looked-up field is not in the schemas.
 */
export function fieldRelation(
  organizationId: bigint,
  fields: readonly SchemaField[],
  linked: LinkedSchemas,
  field: SchemaField,
): FieldRelation | undefined {
  return resolved(organizationId, fields, linked, field)?.relation;
}

/** `fieldRelation`, with a lookup's or rollup's looked-up field as its schema has it. */
function resolved(
  organizationId: bigint,
  fields: readonly SchemaField[],
  linked: LinkedSchemas,
  field: SchemaField,
): { relation: FieldRelation; target: SchemaField | undefined } | undefined {
  if (field.type === "link") {
    const path = linkPathOf(organizationId, field);
    return path && { relation: { type: "link", path }, target: undefined };
  }
  if (field.type !== "lookup" && field.type !== "rollup") return undefined;
  const options = computedOptionsOf(field.options);
  if (!options) return undefined;
  const link = fields.find((f) => f.type === "link" && f.id === options.linkFieldId.toString());
  const path = link && linkPathOf(organizationId, link);
  const linkedTable = link && linkOptionsOf(link.options)?.tableId.toString();
  if (!path || linkedTable === undefined) return undefined;
  const linkedFields = linked.get(linkedTable) ?? [];
  const fieldId = options.fieldId.toString();
  const target = linkedFields.find((f) => f.id === fieldId);
  const queryField = queryFieldsOf(linkedFields).find((f) => f.id === fieldId);
  if (field.type === "lookup") {
    return queryField && { relation: { type: "lookup", path, field: queryField }, target };
  }
  if (!options.function) return undefined;
  return {
    relation: { type: "rollup", path, function: options.function, field: queryField },
    target,
  };
}

/**
 * The table's fields as the query language knows them (`queryFields`, made by `queryFieldsOf`),
 * each link, lookup and rollup with its `relation`: what `where` and `sort` compile on the
 * per-table storage. The same list when the table has none.
 */
export function withRelations(
  organizationId: bigint,
  fields: readonly SchemaField[],
  queryFields: readonly QueryField[],
  linked: LinkedSchemas,
): readonly QueryField[] {
  if (!fields.some((f) => f.type === "link" || f.type === "lookup" || f.type === "rollup")) {
    return queryFields;
  }
  return queryFields.map((queryField, i) => {
    const relation = fieldRelation(organizationId, fields, linked, fields[i]!);
    return relation ? { ...queryField, relation } : queryField;
  });
}

/**
 * One lookup's or rollup's output: an aggregate over the linked rows of its link (`linkedFrom`,
 * the linked record aliased LINKED_ALIAS), or a constant for one with nothing to compute.
 */
interface Member {
  field: SchemaField;
  /**
   * Its value as SQL within `jsonb_build_object`, as stored: choice ids are left for `decode`.
   */
  sql(): string;
  /** Its value from a read (as node-postgres parsed the jsonb), as output. */
  decode(raw: unknown): JsonValue;
}

/**
 * A table's lookups and rollups as a read selects them: every one over the same link is an
 * aggregate of one subquery, so each link's linked records are read once per record, however
 * many lookups and rollups it has.
 */
export interface ComputedValues {
  /** The select list's entries of a read (no parameters): `, <sql> as computed_<n>`. */
  select: string;
  /** The names of `select`'s columns. */
  columns: string[];
  /** `data` of a row read by id with `select`'s columns added, its keys in jsonb's order. */
  dataOf(data: JsonObject, row: Record<string, unknown>): JsonObject;
}

/** Pairs per `jsonb_build_object` call: PostgreSQL takes at most 100 arguments. */
const PAIRS_PER_CALL = 50;

/** The table's lookups and rollups, computed per link in the statement that reads the records. */
export function computedValues(
  organizationId: bigint,
  fields: readonly SchemaField[],
  linked: LinkedSchemas,
): ComputedValues {
  // The SQL of each object: the constants', then one subquery per link (and per 50 values).
  const groups = new Map<string, { path: LinkPath | undefined; members: Member[] }>();
  const add = (key: string, path: LinkPath | undefined, member: Member) => {
    const group = groups.get(key) ?? { path, members: [] };
    group.members.push(member);
    groups.set(key, group);
  };
  for (const field of fields) {
    if (field.type !== "lookup" && field.type !== "rollup") continue;
    const found = resolved(organizationId, fields, linked, field);
    const relation = found?.relation;
    if (relation?.type === "lookup") {
      const member = lookupMember(field, relation, found?.target ?? relation.field);
      add(member ? linkKey(relation.path) : "", member && relation.path, member ?? constant(field));
    } else if (relation?.type === "rollup") {
      const member = rollupMember(field, relation);
      add(member ? linkKey(relation.path) : "", member && relation.path, member ?? constant(field));
    } else {
      add("", undefined, constant(field));
    }
  }
  const objects: { path: LinkPath | undefined; members: Member[] }[] = [];
  for (const group of groups.values()) {
    for (let i = 0; i < group.members.length; i += PAIRS_PER_CALL) {
      objects.push({ path: group.path, members: group.members.slice(i, i + PAIRS_PER_CALL) });
    }
  }
  const objectSql = (object: (typeof objects)[number]) => {
    const pairs = object.members.map((m) => `'${BigInt(m.field.id)}', ${m.sql()}`);
    const built = `jsonb_build_object(${pairs.join(", ")})`;
    return object.path ? `(select ${built} ${linkedFrom(object.path, "r.row_id", true)})` : built;
  };
  const alias = (n: number) => `computed_${n}`;
  return {
    select: objects.map((o, n) => `, ${objectSql(o)} as ${alias(n)}`).join(""),
    columns: objects.map((_, n) => alias(n)),
    dataOf(data, row) {
      if (objects.length === 0) return data;
      const all: JsonObject = { ...data };
      objects.forEach((object, n) => {
        const values = (row[alias(n)] ?? {}) as Record<string, unknown>;
        for (const member of object.members) {
          all[member.field.id] = member.decode(values[member.field.id]);
        }
      });
      const keys = Object.keys(all).sort((a, b) => a.length - b.length || (a < b ? -1 : 1));
      const ordered: JsonObject = {};
      for (const key of keys) ordered[key] = all[key]!;
      return ordered;
    },
  };
}

/** A link's side of its junction: a self-link and its inverse share one, from either side. */
const linkKey = (path: LinkPath) => `${path.junction}.${path.own}`;

/** A lookup's or rollup's value when it has nothing to compute: `[]` or null. */
function constant(field: SchemaField): Member {
  const lookup = field.type === "lookup";
  return {
    field,
    sql: () => (lookup ? "'[]'::jsonb" : "NULL::numeric"),
    decode: () => (lookup ? [] : null),
  };
}

/** The column type a looked-up value is read as (`columnRead`); created_at / updated_at's. */
function readType(field: QueryField): ColumnType | undefined {
  switch (field.type) {
    case "text":
    case "long_text":
    case "email":
    case "url":
    case "phone":
    case "single_select":
      return "text";
    case "number":
      return "numeric";
    case "autonumber":
      return "bigint";
    case "boolean":
      return "boolean";
    case "date":
      return "date";
    case "datetime":
    case "created_at":
    case "updated_at":
      return "timestamptz";
    case "multi_select":
      return "text[]";
    case "json":
      return "jsonb";
    default:
      return undefined;
  }
}

/** The looked-up field's column in a linked record (`created_at` / `updated_at` the row's own). */
function linkedColumn(field: QueryField): string {
  if (field.type === "created_at" || field.type === "updated_at") {
    return `${LINKED_ALIAS}.${field.type}`;
  }
  return `${LINKED_ALIAS}.${fieldColumn(BigInt(field.id))}`;
}

/**
 * A lookup's values, in linked row id order, blanks left out (and values a removed choice left
 * empty, as `decode` leaves them out); undefined for a field with no value to look up. `decode`
 * reads a select's choice ids by the looked-up field's options (`stored`, its schema field).
 */
function lookupMember(
  field: SchemaField,
  relation: Extract<FieldRelation, { type: "lookup" }>,
  stored: FieldLike,
): Member | undefined {
  const target = relation.field;
  const inner = linkedValue(target);
  const type = readType(target);
  if (!inner || !type) return undefined;
  const column = linkedColumn(target);
  return {
    field,
    sql() {
      const value = columnRead(type, column);
      return `coalesce(jsonb_agg(${value} order by ${LINKED_ALIAS}.row_id) filter (where not ${inner.blank}), '[]'::jsonb)`;
    },
    decode(raw) {
      const items = Array.isArray(raw) ? raw : [];
      return items
        .map((item) => columnValue(stored, item as JsonValue))
        .filter((item) => item !== null && !(Array.isArray(item) && item.length === 0));
    },
  };
}

/** A rollup's value (`rollupAggregate`), dates and datetimes in their stored forms. */
function rollupMember(
  field: SchemaField,
  relation: Extract<FieldRelation, { type: "rollup" }>,
): Member | undefined {
  const value = rollupAggregate(relation);
  if (value.kind === "file") return undefined;
  const sql =
    value.kind === "date"
      ? columnRead("date", value.sql)
      : value.kind === "datetime"
        ? columnRead("timestamptz", value.sql)
        : value.sql;
  return {
    field,
    sql: () => sql,
    decode: (raw) => {
      if (raw === null || raw === undefined) return null;
      return value.kind === "number" ? Number(raw) : (raw as JsonValue);
    },
  };
}
