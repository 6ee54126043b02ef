import type { JsonObject } from "@bufbuild/protobuf";
import { tableSchemaOf } from "@rowbase/kit";
import { userTable } from "../src/db/user-tables/names.js";
import { userTableRows } from "../src/db/user-tables/table-rows.js";
import { as, type Harness, SERVICE } from "./harness.js";

/** A record as its user table holds it, its values keyed by field id as the routes read them. */
export interface StoredRow {
  row_id: string;
  organization_id: string;
  data: JsonObject;
  version: string;
  created_by: string;
  updated_by: string;
}

/**
 * What the table's user table holds, oldest first (only `rowIds` when given): read with the
 * records service's own select list (`userTableRows`), from the table's schema as catalog has
 * it now. For tests that check what a write stored, beyond what it answered.
 */
export async function storedRows(
  h: Pick<Harness, "db" | "catalog" | "logger">,
  tableId: bigint,
  rowIds?: readonly bigint[],
): Promise<StoredRow[]> {
  const schema = tableSchemaOf(
    await h.catalog.getTableSchema({ tableId }, await as(SERVICE)),
    h.logger,
  );
  const rows = userTableRows(schema.organizationId, tableId, schema.fields);
  const { rows: found } = await h.db.query(
    `select ${rows.values}, ${schema.organizationId}::text as organization_id, r.version::text,
       r.created_by, r.updated_by
     from ${rows.relation} r where $1::bigint[] is null or r.row_id = any($1::bigint[])
     order by r.row_id`,
    [rowIds ?? null],
  );
  // An empty column reads as null; the routes leave such a field out of `data`.
  return found.map((row: StoredRow & Record<string, unknown>) => ({
    row_id: String(row.row_id),
    organization_id: row.organization_id,
    data: Object.fromEntries(
      Object.entries(rows.recordOf(row).data).filter(([, value]) => value !== null),
    ),
    version: row.version,
    created_by: row.created_by,
    updated_by: row.updated_by,
  }));
}

/**
 * The values of every record the table's user table holds, oldest first; none once the user
 * table is gone (its registry row goes with it).
 */
export async function storedData(
  h: Pick<Harness, "db" | "catalog" | "logger">,
  tableId: bigint,
): Promise<JsonObject[]> {
  const { rows } = await h.db.query("select 1 from records.user_table where table_id = $1", [
    tableId.toString(),
  ]);
  if (rows.length === 0) return [];
  return (await storedRows(h, tableId)).map((row) => row.data);
}

/**
 * SQL that takes a new row id as the service does, from records' one sequence: for tests that
 * insert straight into a user table, so that a row id still finds its table (`row_range`).
 */
export const NEXT_ROW_ID = "nextval('records.row_id_seq')";

/**
 * How many records the organization stores, counted row by row in each of its user tables (and
 * in `record`, for tables stored there, until the upgrade drops it): the ground truth that the
 * counts kept by triggers and the organization's usage must match, so it reads neither.
 */
export async function storedCount(h: Pick<Harness, "db">, organizationId: bigint): Promise<number> {
  const { rows: tables } = await h.db.query(
    "select table_id::text from records.user_table where organization_id = $1 order by table_id",
    [organizationId.toString()],
  );
  const { rows: legacy } = await h.db.query(
    "select to_regclass('records.record') is not null as kept",
  );
  const counts = [
    ...(legacy[0].kept
      ? ["select count(*) as n from records.record where organization_id = $1"]
      : []),
    ...tables.map(
      (row: { table_id: string }) =>
        `select count(*) as n from ${userTable(organizationId, BigInt(row.table_id))}`,
    ),
  ];
  if (counts.length === 0) return 0;
  const { rows } = await h.db.query(
    `select sum(n)::int as n from (${counts.join(" union all ")}) counts`,
    legacy[0].kept ? [organizationId.toString()] : [],
  );
  return rows[0].n;
}
