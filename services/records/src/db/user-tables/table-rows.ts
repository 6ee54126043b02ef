import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { SchemaField } from "@rowbase/kit";
import { choicesOf } from "@rowbase/kit/field-types";
import { checkDataSizes, epochMs, type TableRows } from "../rows.js";
import {
  choiceNamesSql,
  columnFromJson,
  columnJson,
  columnRead,
  columnTypeOf,
  columnValue,
} from "./columns.js";
import { computedValues, type LinkedFields } from "./computed-values.js";
import { fieldColumn, userTable } from "./names.js";

/** Pairs per `jsonb_build_object` call: PostgreSQL takes at most 100 arguments. */
const PAIRS_PER_CALL = 50;

/**
 * A user table's records as the statements reach them (`TableRows`): a column per field that has
 * one. A record's `data` is keyed by field id with each value as the jsonb storage holds it
 * (choice names, dates and datetimes in their stored forms), so everything after a read (the
 * page budget, the output, the files) is the same for both storages. Lists and reads of several
 * records build it in the statement from the columns (`columns`: the page budget measures it
 * there; choice names and ids are parameters); a read of one record selects the columns as they
 * are and builds it here (`values`, `dataOf`), which costs PostgreSQL a third as much. Writes send each record's values as its
 * columns take them (`columnJson`: choice ids, numbers as exact text) in one JSON parameter;
 * every write of a row counts its `version` up. A record over RECORD_MAX_BYTES is refused as in
 * the jsonb storage, measured on its values as written.
 */
export function userTableRows(
  organizationId: bigint,
  tableId: bigint,
  fields: readonly SchemaField[],
  linked: LinkedFields = new Map(),
): TableRows {
  const relation = userTable(organizationId, tableId);
  // Lookups and rollups, computed in the statement (computed-values.ts).
  const computed = computedValues(organizationId, fields, linked);
  const stored = fields.filter((field) => columnTypeOf(field.type) !== undefined);
  const fromData = (data: string) =>
    stored.map((field) => ({
      column: fieldColumn(BigInt(field.id)),
      value: columnFromJson(columnTypeOf(field.type)!, `${data} -> '${BigInt(field.id)}'`),
    }));
  const head = `r.row_id, ${tableId}::bigint as table_id, ${epochMs("r.created_at")} as created_ms, ${epochMs("r.updated_at")} as updated_ms`;
  // In the order of jsonb's keys (shorter first, then by their text: by id), as `columns`' data.
  const byKey = stored
    .map((field) => ({ field, column: fieldColumn(BigInt(field.id)) }))
    .sort((a, b) => a.field.id.length - b.field.id.length || (a.field.id < b.field.id ? -1 : 1));
  return {
    relation,
    // Only this table's rows are in its relation: the placeholder must name it.
    ofTable: (tableIdParam) => `${tableIdParam}::bigint = ${tableId}`,
    head,
    // Kept by the table's triggers (createTableSql), as the jsonb storage's by `record`'s.
    count: `select coalesce(sum(delta), 0)::bigint from record_count where table_id = ${tableId}`,
    columns(firstParam) {
      const params: unknown[] = [];
      const param = (value: unknown) => {
        params.push(value);
        return `$${firstParam + params.length - 1}::text[]`;
      };
      const pairs = stored.map((field) => {
        const column = `r.${fieldColumn(BigInt(field.id))}`;
        let value = columnRead(columnTypeOf(field.type)!, column);
        if (field.type === "single_select" || field.type === "multi_select") {
          const choices = choicesOf(field.options);
          const names = param(choices.map((c) => c.name));
          const ids = param(choices.map((c) => c.id));
          value = choiceNamesSql(field.type, column, names, ids);
        }
        return `'${BigInt(field.id)}', ${value}`;
      });
      const calls: string[] = [];
      for (let i = 0; i < pairs.length; i += PAIRS_PER_CALL) {
        calls.push(`jsonb_build_object(${pairs.slice(i, i + PAIRS_PER_CALL).join(", ")})`);
      }
      const computedData = computed.data(param);
      if (computedData) calls.push(computedData);
      const data = calls.length > 0 ? calls.join(" || ") : "'{}'::jsonb";
      return { sql: `${head}, ${data} as data`, params };
    },
    values: `${head}${byKey.map(({ field, column }) => `, ${columnRead(columnTypeOf(field.type)!, `r.${column}`)} as ${column}`).join("")}${computed.select}`,
    dataOf(row) {
      const data: JsonObject = {};
      for (const { field, column } of byKey) data[field.id] = columnValue(field, row[column]);
      return computed.dataOf(data, row);
    },
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
