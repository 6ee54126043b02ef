import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { SchemaField } from "@rowbase/kit";
import { checkDataSizes, epochMs, type TableRows } from "../rows.js";
import { columnFromJson, columnJson, columnRead, columnTypeOf, columnValue } from "./columns.js";
import { linkedValues } from "./computed-values.js";
import type { LinkedSchemas } from "./link-values.js";
import { fieldColumn, userTable } from "./names.js";

/**
 * A user table's records as the statements reach them (`TableRows`): a column per field that has
 * one. A record's `data` is keyed by field id with each value as the jsonb storage holds it
 * (choice names, dates and datetimes in their stored forms), so everything after a read (the
 * output, the files) is the same for both storages. Every read selects the columns as they are
 * and builds `data` here (`values`, `recordOf`): building it in the statement (jsonb of every
 * column, choice ids mapped to names) cost PostgreSQL two to three times as much per page as
 * the shared jsonb table's stored documents did. The page budget adds the columns' sizes
 * (`sizeOf`). Writes send each record's values as its
 * columns take them (`columnJson`: choice ids, numbers as exact text) in one JSON parameter;
 * every write of a row counts its `version` up. A record over RECORD_MAX_BYTES is refused as in
 * the jsonb storage, measured on its values as written.
 *
 * A link field's value is read in the same statement from its junction table, with the lookups
 * and rollups over the same link (`computed-values.ts`, `linked` giving the linked tables'
 * fields), which also names the links that hold more than a value shows. A write sends no link
 * value: the links are written to their junctions apart (`link-writes.ts`).
 */
export function userTableRows(
  organizationId: bigint,
  tableId: bigint,
  fields: readonly SchemaField[],
  linked: LinkedSchemas = new Map(),
): TableRows {
  const relation = userTable(organizationId, tableId);
  // Links, lookups and rollups, read in the statement (computed-values.ts).
  const computed = linkedValues(organizationId, fields, linked);
  const stored = fields.filter((field) => columnTypeOf(field.type) !== undefined);
  const fromData = (data: string) =>
    stored.map((field) => ({
      column: fieldColumn(BigInt(field.id)),
      value: columnFromJson(columnTypeOf(field.type)!, `${data} -> '${BigInt(field.id)}'`),
    }));
  const head = `r.row_id, ${tableId}::bigint as table_id, ${epochMs("r.created_at")} as created_ms, ${epochMs("r.updated_at")} as updated_ms`;
  // In the order of jsonb's keys (shorter first, then by their text: by id), as `columns`' data.
  const byKey = stored
    .map((field) => ({
      field,
      column: fieldColumn(BigInt(field.id)),
      sql: columnRead(columnTypeOf(field.type)!, `r.${fieldColumn(BigInt(field.id))}`),
    }))
    .sort((a, b) => a.field.id.length - b.field.id.length || (a.field.id < b.field.id ? -1 : 1));
  return {
    relation,
    // Only this table's rows are in its relation: the placeholder must name it.
    ofTable: (tableIdParam) => `${tableIdParam}::bigint = ${tableId}`,
    head,
    // Kept by the table's triggers (createTableSql), as the jsonb storage's by `record`'s.
    count: `select coalesce(sum(delta), 0)::bigint from record_count where table_id = ${tableId}`,
    values: `${head}${byKey.map(({ sql, column }) => `, ${sql} as ${column}`).join("")}${computed.select}`,
    recordOf(row) {
      const data: JsonObject = {};
      for (const { field, column } of byKey) data[field.id] = columnValue(field, row[column]);
      return computed.recordOf(data, row);
    },
    sizeOf: (alias) =>
      [
        "0",
        ...byKey.map(({ field, column }) => {
          const type = columnTypeOf(field.type);
          const value = `${alias}.${column}`;
          // Text (dates and datetimes are read as text) by its length; a json field's value
          // as the text it is sent as; the rest (numbers, booleans, choice id arrays) as
          // PostgreSQL holds them.
          if (type === "text" || type === "date" || type === "timestamptz") {
            return `coalesce(octet_length(${value}), 0)`;
          }
          if (type === "jsonb") return `coalesce(octet_length(${value}::text), 0)`;
          return `coalesce(pg_column_size(${value}), 0)`;
        }),
        // Links, lookups and rollups, json objects the statement built.
        ...computed.columns.map((column) => `coalesce(pg_column_size(${alias}.${column}), 0)`),
      ].join(" + "),
    insert(p) {
      const values = fromData("item.data");
      return `insert into ${relation}
         (row_id, created_by, updated_by${values.map((v) => `, ${v.column}`).join("")})
       select id.row_id, ${p.actor}, ${p.actor}${values.map((v) => `, ${v.value}`).join("")}
       from unnest(${p.ids}::bigint[]) with ordinality as id(row_id, n)
         join jsonb_array_elements(${p.data}::jsonb) with ordinality as item(data, n) using (n)
       where ${p.condition}
       returning created_at, updated_at`;
    },
    assign: (data) =>
      [
        ...fromData(`(${data})`).map((v) => `${v.column} = ${v.value}`),
        "version = r.version + 1",
      ].join(", "),
    dataParam(datas) {
      checkDataSizes(datas);
      const rows = datas.map((data) => {
        const row: Record<string, JsonValue> = {};
        for (const field of stored) {
          const value = (data as JsonObject)[field.id];
          if (value !== undefined && value !== null) row[field.id] = columnJson(field, value);
        }
        return row;
      });
      return JSON.stringify(rows);
    },
  };
}
