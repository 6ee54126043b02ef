import type { SchemaField } from "@rowbase/kit";
import { choicesOf } from "@rowbase/kit/field-types";
import type { PageRows } from "../reads.js";
import { epochMs } from "../rows.js";
import { columnRead, columnTypeOf } from "./columns.js";
import { userTable } from "./names.js";

/** Pairs per `jsonb_build_object` call: PostgreSQL takes at most 100 arguments. */
const PAIRS_PER_CALL = 50;

/**
 * How a list reads a user table's records (`PageQuery.rows`): a RecordRow whose `data` is built
 * in the statement from the fields' columns, keyed by field id and with each value as the jsonb
 * storage holds it (choice names, dates and datetimes in their stored forms), so everything after
 * the read (the page budget, the output, the files) is the same for both storages. Choice names
 * and ids are parameters; the table's count is `count(*)` of its relation.
 */
export function userTableRows(
  organizationId: bigint,
  tableId: bigint,
  fields: readonly SchemaField[],
): PageRows {
  const relation = userTable(organizationId, tableId);
  return {
    relation,
    count: `select count(*) from ${relation}`,
    columns(firstParam) {
      const params: unknown[] = [];
      const param = (value: unknown, type: string) => {
        params.push(value);
        return `$${firstParam + params.length - 1}::${type}`;
      };
      const pairs: string[] = [];
      for (const field of fields) {
        const type = columnTypeOf(field.type);
        if (!type) continue;
        const column = `r.f_${BigInt(field.id)}`;
        let value = columnRead(type, column);
        if (field.type === "single_select" || field.type === "multi_select") {
          const choices = choicesOf(field.options);
          const names = param(
            choices.map((c) => c.name),
            "text[]",
          );
          const ids = param(
            choices.map((c) => c.id),
            "text[]",
          );
          value =
            field.type === "single_select"
              ? `(${names})[array_position(${ids}, ${column})]`
              : `(CASE WHEN ${column} IS NOT NULL THEN coalesce((select jsonb_agg((${names})[array_position(${ids}, c)] order by n) from unnest(${column}) with ordinality as u(c, n) where array_position(${ids}, c) IS NOT NULL), '[]'::jsonb) END)`;
        }
        pairs.push(`'${BigInt(field.id)}', ${value}`);
      }
      const calls: string[] = [];
      for (let i = 0; i < pairs.length; i += PAIRS_PER_CALL) {
        calls.push(`jsonb_build_object(${pairs.slice(i, i + PAIRS_PER_CALL).join(", ")})`);
      }
      const data = calls.length > 0 ? calls.join(" || ") : "'{}'::jsonb";
      return {
        sql: `r.row_id, ${tableId}::bigint as table_id, ${epochMs("r.created_at")} as created_ms, ${epochMs("r.updated_at")} as updated_ms, ${data} as data`,
        params,
      };
    },
  };
}
