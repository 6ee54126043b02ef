// A stored record as the statements read and write it: the `record` row's columns and their shape
// in TypeScript (`toStored`), the statement type the record routes build, and the values a write
// sends, bounded by RECORD_MAX_BYTES.

import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { EntityManager } from "@mikro-orm/postgresql";
import { query, RECORD_MAX_BYTES } from "@rowbase/kit";
import type { StoredRecord } from "../domain/record-output.js";

/**
 * A `record` row as read through `recordColumns` (bigint as text; times as epoch milliseconds,
 * since the ORM's driver hands timestamptz over as text in the session's time zone).
 */
export interface RecordRow {
  row_id: string;
  table_id: string;
  data: JsonObject;
  created_ms: number;
  updated_ms: number;
  /** A user table with link fields: those whose values were cut (`TableRows.recordOf`). */
  links_truncated?: string[] | null;
}

/** Epoch milliseconds of a timestamptz column, as a JSON-safe double. */
export function epochMs(column: string): string {
  return `floor(extract(epoch from ${column}) * 1000)::float8`;
}

/** The select list that `toStored` reads, for `record` under an optional alias. */
export function recordColumns(alias?: string): string {
  return `${columnsButData(alias)}, ${alias ? `${alias}.` : ""}data`;
}

/**
 * `recordColumns` but the data, for statements that wrote data the caller already holds (the
 * database would write it out as text, to be parsed again).
 */
export function columnsButData(alias?: string): string {
  const p = alias ? `${alias}.` : "";
  return `${p}row_id, ${p}table_id, ${epochMs(`${p}created_at`)} as created_ms, ${epochMs(`${p}updated_at`)} as updated_ms`;
}

export const RECORD_COLUMNS = recordColumns();

export function toStored(row: RecordRow): StoredRecord {
  const record: StoredRecord = {
    rowId: BigInt(row.row_id),
    tableId: BigInt(row.table_id),
    data: row.data,
    createdAt: new Date(row.created_ms),
    updatedAt: new Date(row.updated_ms),
  };
  if (row.links_truncated && row.links_truncated.length > 0) {
    record.linksTruncated = row.links_truncated;
  }
  return record;
}

export const byRowId = (a: StoredRecord, b: StoredRecord) =>
  a.rowId < b.rowId ? -1 : a.rowId > b.rowId ? 1 : 0;

/**
 * A statement as kit's `query` sends it. The record routes' statements are built apart from
 * running them, so that the benchmark's raw-postgres ceiling sends exactly these
 * (`@rowbase/records/statements`).
 */
export interface Statement {
  sql: string;
  params: unknown[];
  /** Sent as a named prepared statement (kit's `query` with `prepare`). */
  prepare: boolean;
}

/** Reads rows of records in a statement that returns `RECORD_COLUMNS`. */
export async function recordsOf(
  em: EntityManager,
  sql: string,
  params: readonly unknown[],
  options: { prepare?: boolean } = {},
): Promise<StoredRecord[]> {
  return (await query<RecordRow>(em, sql, params, options)).map(toStored);
}

/**
 * A write's records whose values would pass RECORD_MAX_BYTES (thrown before the statement is
 * sent): their indexes among the records written.
 */
export class RecordsTooLarge extends Error {
  constructor(readonly indexes: readonly number[]) {
    super(`records over ${RECORD_MAX_BYTES} bytes of values: ${indexes.join(", ")}`);
  }
}

/**
 * A number in exponent form, as JSON.stringify writes those past 1e21 and below 1e-6 (`1e+308`,
 * `1.5e-7`): the pattern also meets such text inside a string, which only costs a walk.
 */
const EXPONENT = /\de[+-]\d/;

/**
 * How many bytes more than JSON.stringify's text `value`'s numbers take as PostgreSQL sends them
 * back: jsonb writes every number out in full, `1e+308` as 309 digits and `1.5e-7` as
 * `0.00000015`, so a record of such numbers would come back tens of times its written size.
 */
function numbersExpandedBy(value: JsonValue): number {
  if (typeof value === "number") {
    const text = String(value);
    const e = text.indexOf("e");
    if (e < 0) return 0;
    const digits = text.slice(0, e).replace(/[-.]/g, "").length;
    const exponent = Number(text.slice(e + 1));
    const sign = value < 0 ? 1 : 0;
    // Past the point: the digits and zeros up to it (a point when digits follow it); before
    // it: "0.", the zeros after the point, the digits.
    const full =
      exponent >= 0
        ? Math.max(digits, exponent + 1) + (digits > exponent + 1 ? 1 : 0)
        : 1 - exponent + digits;
    return sign + full - text.length;
  }
  if (value === null || typeof value !== "object") return 0;
  let extra = 0;
  for (const item of Array.isArray(value) ? value : Object.values(value)) {
    extra += numbersExpandedBy(item as JsonValue);
  }
  return extra;
}

/**
 * Records' data as the write statements send it, one JSON array (the same text as
 * `JSON.stringify(datas)`), each record's text measured on the way so that the bound costs no
 * second serialization: a string takes at most 3 UTF-8 bytes per UTF-16 unit, so only a text
 * longer than a third of the bound is counted byte by byte. Numbers count as PostgreSQL sends
 * them back, written out in full (`numbersExpandedBy`), the one case where a read is not near
 * the written size. Throws RecordsTooLarge.
 */
export function dataArrayJson(datas: readonly JsonObject[]): string {
  const texts: string[] = [];
  const over: number[] = [];
  datas.forEach((data, index) => {
    const text = JSON.stringify(data);
    const extra = EXPONENT.test(text) ? numbersExpandedBy(data) : 0;
    if (
      text.length * 3 + extra > RECORD_MAX_BYTES &&
      Buffer.byteLength(text) + extra > RECORD_MAX_BYTES
    ) {
      over.push(index);
    }
    texts.push(text);
  });
  if (over.length > 0) throw new RecordsTooLarge(over);
  return `[${texts.join(",")}]`;
}

/**
 * At least as many bytes as `value`'s JSON text takes as `dataArrayJson` measures it (UTF-8, its
 * numbers written out in full), without writing the text: a UTF-16 unit of a string or key takes
 * at most 6 bytes of JSON (`\u001f`, a lone surrogate's `\udc00`).
 */
function jsonBytesAtMost(value: JsonValue | undefined): number {
  if (typeof value === "string") return 2 + 6 * value.length;
  if (typeof value === "number")
    return Math.max(4, String(value).length) + numbersExpandedBy(value);
  if (value === null || typeof value !== "object") return 5;
  let bytes = 2;
  if (Array.isArray(value)) {
    for (const item of value) bytes += 1 + jsonBytesAtMost(item);
    return bytes;
  }
  for (const key of Object.keys(value)) bytes += 4 + 6 * key.length + jsonBytesAtMost(value[key]);
  return bytes;
}

/**
 * Throws RecordsTooLarge for the records `dataArrayJson` would refuse, for a storage that sends
 * other text than theirs: a record that cannot reach RECORD_MAX_BYTES (`jsonBytesAtMost`) is not
 * written out to be measured.
 */
export function checkDataSizes(datas: readonly JsonObject[]): void {
  const over: number[] = [];
  datas.forEach((data, index) => {
    if (jsonBytesAtMost(data) <= RECORD_MAX_BYTES) return;
    const text = JSON.stringify(data);
    const extra = EXPONENT.test(text) ? numbersExpandedBy(data) : 0;
    if (Buffer.byteLength(text) + extra > RECORD_MAX_BYTES) over.push(index);
  });
  if (over.length > 0) throw new RecordsTooLarge(over);
}

/** The placeholders an insert's SQL reads (`TableRows.insert`). */
export interface InsertPlaceholders {
  tableId: string;
  organizationId: string;
  actor: string;
  /** bigint[] of the new row ids. */
  ids: string;
  /** JSON array of the records' data as `TableRows.dataParam` makes it, in the ids' order. */
  data: string;
  /** Rows are inserted only when this holds. */
  condition: string;
}

/**
 * Where a table's records are stored and how the statements reach them, aliased `r`: the one
 * jsonb record table (`RECORD_ROWS`), or the table's own PostgreSQL table with a column per field
 * (`userTableRows`). The statements are written once over it.
 */
export interface TableRows {
  /** The relation holding the table's rows. */
  relation: string;
  /** The condition that keeps a statement over `r` to the table, given the table id's placeholder. */
  ofTable(tableId: string): string;
  /** A record's row_id, table_id, created_ms and updated_ms over `r` (a RecordRow but its data). */
  head: string;
  /**
   * A record's select list over `r`, without parameters: the head, then the values as the
   * storage holds them, which `recordOf` turns into the record's `data`. Every read selects
   * this: building `data` in Node costs PostgreSQL a fraction of building it in the statement.
   */
  values: string;
  /** The `data` of a row read through `values`, and its link fields whose values were cut. */
  recordOf(row: Record<string, unknown>): { data: JsonObject; linksTruncated?: string[] };
  /**
   * SQL of the bytes one row selected through `values` holds, over the columns of that select
   * named `alias` (the page budget, `withinReadBudget`): text by its length, without reading
   * it (`octet_length` takes a stored text's length from its header), the rest as PostgreSQL
   * holds it in memory.
   */
  sizeOf(alias: string): string;
  /** SQL counting every record of the table, over the table id's placeholder `$1` when it needs it. */
  count: string;
  /** The insert of new records, returning each one's created_at and updated_at. */
  insert(p: InsertPlaceholders): string;
  /** The SET list that writes a record's data: `data`, one record's as `dataParam` makes it. */
  assign(data: string): string;
  /** The data parameter's JSON text; throws RecordsTooLarge for a record over RECORD_MAX_BYTES. */
  dataParam(datas: readonly JsonObject[]): string;
}

/** Records in the one jsonb table of every table's records. */
export const RECORD_ROWS: TableRows = {
  relation: "record",
  ofTable: (tableId) => `r.table_id = ${tableId}`,
  head: columnsButData("r"),
  values: recordColumns("r"),
  recordOf: (row) => ({ data: row.data as JsonObject }),
  sizeOf: (alias) => `octet_length(${alias}.data::text)`,
  count: "select coalesce(sum(delta), 0)::bigint from record_count where table_id = $1",
  insert: (
    p,
  ) => `insert into record (row_id, table_id, organization_id, data, created_by, updated_by)
       select id.row_id, ${p.tableId}, ${p.organizationId}, item.data, ${p.actor}, ${p.actor}
       from unnest(${p.ids}::bigint[]) with ordinality as id(row_id, n)
         join jsonb_array_elements(${p.data}::jsonb) with ordinality as item(data, n) using (n)
       where ${p.condition}
       returning created_at, updated_at`,
  assign: (data) => `data = ${data}`,
  dataParam: dataArrayJson,
};

/**
 * Row ids as a `bigint[]` parameter's text (`{1,2,3}`): the driver's own writing of an array
 * checks and quotes every element.
 */
export function rowIdsParam(rowIds: readonly bigint[]): string {
  return `{${rowIds.join(",")}}`;
}
