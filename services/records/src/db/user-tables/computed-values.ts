import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { SchemaField } from "@rowbase/kit";
import {
  computedOptionsOf,
  type FieldLike,
  linkOptionsOf,
  MAX_LINKS_PER_VALUE,
} from "@rowbase/kit/field-types";
import { queryFieldsOf } from "../../domain/query-fields.js";
import type { FieldRelation, LinkPath, QueryField } from "../../query/index.js";
import {
  JUNCTION_ALIAS,
  LINKED_ALIAS,
  linkedValue,
  rollupAggregate,
} from "../../query/relational-source.js";
import { type ColumnType, columnRead, columnValue } from "./columns.js";
import { type LinkedSchemas, primaryFieldOf } from "./link-values.js";
import { fieldColumn, linkJunction, userTable } from "./names.js";

/**
 * Links, lookups and rollups on the per-table storage: read in the statement that reads the
 * records (a page, a read by id), never stored and never a query per record. Everything a read
 * shows through one link (the link's value, and its lookups and rollups) is one correlated
 * subquery over the link's junction and the linked records (`linkRows`): for a page, PostgreSQL
 * runs it for the page's rows only, and reads each linked record once however many values it
 * feeds.
 * - A link's value is its first MAX_LINKS_PER_VALUE linked records in row id order, each
 *   `{"row_id", "display"}` (`linkMember`), `[]` for none; the subquery says too whether the
 *   record links more (`links_truncated`).
 * - A lookup is the array of the looked-up field's non-blank values across the linked records,
 *   by linked row id, `[]` for none; a rollup one value over all of them (`rollupAggregate`).
 * A lookup or rollup whose link, inverse or looked-up field is not in the schemas (deleted
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
 * One link's, lookup's or rollup's output: an aggregate over the records its link links
 * (`linkRows`, aliased LINKED_ALIAS, in row id order), or a constant for one with nothing to
 * compute.
 */
interface Member {
  field: SchemaField;
  /** Its value as SQL within `json_build_object`, as stored: choice ids are left for `decode`. */
  sql(): string;
  /** Its value from a read (as node-postgres parsed the json), as output. */
  decode(raw: unknown): JsonValue;
}

/**
 * A table's links, lookups and rollups as a read selects them: every one over the same link is
 * an aggregate of one subquery, so each link's linked records are read once per record, however
 * many values they feed.
 */
export interface LinkedValues {
  /** The select list's entries of a read (no parameters): `, <sql> as computed_<n>`. */
  select: string;
  /** The names of `select`'s columns. */
  columns: string[];
  /**
   * A row read with `select`'s columns added: `data` (the row's other values) with these added,
   * and the link fields whose values were cut at MAX_LINKS_PER_VALUE.
   */
  recordOf(
    data: JsonObject,
    row: Record<string, unknown>,
  ): { data: JsonObject; linksTruncated: string[] };
}

/** Pairs per `json_build_object` call: PostgreSQL takes at most 100 arguments. */
const PAIRS_PER_CALL = 50;

/** The key of a link subquery's object that says whether the link's value was cut. */
const TRUNCATED = "truncated";

/** The links, lookups and rollups of `fields`, computed per link in the statement that reads them. */
export function linkedValues(
  organizationId: bigint,
  fields: readonly SchemaField[],
  linked: LinkedSchemas,
): LinkedValues {
  // The SQL of each object: the constants', then one subquery per link (and per 50 values).
  interface Group {
    path: LinkPath | undefined;
    members: Member[];
    /** The link field whose value the group shows. */
    shown?: SchemaField;
  }
  const groups = new Map<string, Group>();
  const add = (key: string, path: LinkPath | undefined, member: Member) => {
    const group = groups.get(key) ?? { path, members: [] };
    group.members.push(member);
    groups.set(key, group);
    return group;
  };
  for (const field of fields) {
    if (field.type === "link") {
      const path = linkPathOf(organizationId, field);
      const target = linkOptionsOf(field.options)?.tableId.toString();
      if (!path || target === undefined) continue;
      // First in its group, so that it is in the group's first object with the cut flag.
      const group = add(linkKey(path), path, linkMember(field, linked.get(target)));
      group.members.unshift(group.members.pop()!);
      group.shown = field;
      continue;
    }
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
  // A group's members in chunks of PAIRS_PER_CALL (the shown link's value in the first), each
  // chunk one object; a group of a link reads it in one subquery per chunk.
  const objects: Group[] = [];
  for (const group of groups.values()) {
    for (let i = 0; i < group.members.length; i += PAIRS_PER_CALL - 1) {
      objects.push({
        path: group.path,
        members: group.members.slice(i, i + PAIRS_PER_CALL - 1),
        ...(i === 0 && group.shown ? { shown: group.shown } : {}),
      });
    }
  }
  const objectSql = ({ path, members, shown }: Group) => {
    const pairs = members.map((m) => `'${BigInt(m.field.id)}', ${m.sql()}`);
    if (shown) pairs.push(`'${TRUNCATED}', count(*) > ${MAX_LINKS_PER_VALUE}`);
    const built = `json_build_object(${pairs.join(", ")})`;
    if (!path) return built;
    // Only the link's own value: its first MAX_LINKS_PER_VALUE links and one more, to tell
    // whether it was cut; anything computed over the link reads all of them.
    const onlyValue = shown !== undefined && members.length === 1;
    return `(select ${built} ${linkRows(path, onlyValue)})`;
  };
  const alias = (n: number) => `computed_${n}`;
  return {
    select: objects.map((o, n) => `, ${objectSql(o)} as ${alias(n)}`).join(""),
    columns: objects.map((_, n) => alias(n)),
    recordOf(data, row) {
      const linksTruncated: string[] = [];
      objects.forEach((object, n) => {
        const values = (row[alias(n)] ?? {}) as Record<string, unknown>;
        for (const member of object.members) {
          data[member.field.id] = member.decode(values[member.field.id]);
        }
        if (object.shown && values[TRUNCATED] === true) linksTruncated.push(object.shown.id);
      });
      return { data, linksTruncated };
    },
  };
}

/**
 * `from` the record `r`'s links (the junction's linked row ids in order, aliased JUNCTION_ALIAS)
 * joined to the records they link (LINKED_ALIAS): `capped` reads only the first
 * MAX_LINKS_PER_VALUE and one more. Each linked record is looked up by its key in a fenced
 * lateral subquery (`offset 0`): joined plainly, PostgreSQL hashes the whole linked table once
 * per record of the page when that table is small, and looking them up at once
 * (`row_id = any(...)`) turns into a scan of the whole table until it has statistics. The lateral
 * lookup is a nested loop, which keeps the junction's order: the aggregates take the linked
 * records in row id order without sorting them again.
 */
function linkRows(path: LinkPath, capped: boolean): string {
  const j = JUNCTION_ALIAS;
  const cap = capped ? ` limit ${MAX_LINKS_PER_VALUE + 1}` : "";
  return `from (select ${j}.${path.other} as linked_row_id from ${path.junction} ${j}
       where ${j}.${path.own} = r.row_id order by ${j}.${path.other}${cap}) ${j}
     cross join lateral (select * from ${path.table} t where t.row_id = ${j}.linked_row_id offset 0) ${LINKED_ALIAS}`;
}

/**
 * A link's value: its first MAX_LINKS_PER_VALUE linked records in row id order, each
 * `{"row_id", "display"}`. `display` is the linked record's primary field (`primaryFieldOf` of
 * `targetFields`, the linked table's fields), or its row id as text when the table has none or
 * the value is empty. The statement sends the ids and the displays as two arrays (a JSON object
 * per linked record costs PostgreSQL more than the rest of the lookup).
 */
function linkMember(field: SchemaField, targetFields: readonly SchemaField[] | undefined): Member {
  const primary = targetFields && primaryFieldOf(targetFields);
  const id = `${LINKED_ALIAS}.row_id`;
  const display = primary
    ? `coalesce(nullif(${LINKED_ALIAS}.${fieldColumn(BigInt(primary.id))}, ''), ${id}::text)`
    : `${id}::text`;
  const first = `[1:${MAX_LINKS_PER_VALUE}]`;
  return {
    field,
    sql: () => `json_build_array((array_agg(${id}))${first}, (array_agg(${display}))${first})`,
    decode(raw) {
      const [ids, displays] = (raw ?? []) as [number[] | null, string[] | null];
      if (!ids || !displays) return [];
      return ids.map((rowId, i) => ({ row_id: rowId, display: displays[i]! }));
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
    sql: () => (lookup ? "'[]'::json" : "NULL::numeric"),
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
      return `coalesce(json_agg(${value}) filter (where not ${inner.blank}), '[]')`;
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
