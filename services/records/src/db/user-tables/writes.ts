import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { SchemaField } from "@rowbase/kit";
import { dataArrayJson, type InsertRows } from "../rows.js";
import { columnFromJson, columnJson, columnTypeOf } from "./columns.js";
import { fieldColumn, userTable } from "./names.js";

/**
 * How a create inserts records into a user table (`CreateTarget.insert`): a column per field
 * that has one, filled from the data parameter, whose records hold each value as its column
 * takes it (`columnJson`: choice ids, numbers as exact text), keyed by field id. A record over
 * RECORD_MAX_BYTES is refused as in the jsonb storage, measured on its values as written.
 */
export function userTableInsert(
  organizationId: bigint,
  tableId: bigint,
  fields: readonly SchemaField[],
): InsertRows {
  const stored = fields.filter((field) => columnTypeOf(field.type) !== undefined);
  const columns = stored.map((field) => `, ${fieldColumn(BigInt(field.id))}`).join("");
  const values = stored
    .map((field) => {
      const value = columnFromJson(columnTypeOf(field.type)!, `item.data -> '${BigInt(field.id)}'`);
      return `, ${value}`;
    })
    .join("");
  return {
    sql: (p) => `insert into ${userTable(organizationId, tableId)}
         (row_id, created_by, updated_by${columns})
       select id.row_id, ${p.actor}, ${p.actor}${values}
       from unnest(${p.ids}::bigint[]) with ordinality as id(row_id, n)
         join jsonb_array_elements(${p.data}::jsonb) with ordinality as item(data, n) using (n)
       where ${p.condition}
       returning created_at, updated_at`,
    dataParam(datas) {
      dataArrayJson(datas);
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
