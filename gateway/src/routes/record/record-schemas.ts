import {
  isPlainObject,
  mebibytes,
  PAGE_MAX_BYTES,
  RECORD_BATCH_MAX,
  RECORD_LIMIT_DEFAULT,
  RECORD_LIMIT_MAX,
  RECORD_MAX_BYTES,
  RECORD_OFFSET_MAX,
  REFERENCE_LIST_MAX_LENGTH,
  WHERE_MAX_LENGTH,
} from "@rowbase/kit";
import { z } from "zod";
import { requestBody, responseData } from "../../routing/api-schemas.js";
import { bodyId, oneOf, queryId } from "../../validation/fields.js";
import { checkedObject, jsonObject } from "../../validation/json-object.js";
import { once, queryInteger, queryText } from "../../validation/query-values.js";

/**
 * Parameters, bodies and answers of the record routes (docs/routes/records.md).
 * The v1 routes take the table (and row) from the path, the query-form routes from the query
 * string; both read the same list and read options.
 */

export const RESPONSE_FORMATS = ["ids", "names"] as const;
export type ResponseFormatName = (typeof RESPONSE_FORMATS)[number];
export const RICH_TEXT_FORMATS = ["markdown", "html", "plain"] as const;
export type RichTextFormatName = (typeof RICH_TEXT_FORMATS)[number];
export const COUNT_MODES = ["exact", "estimated", "none"] as const;
export type CountModeName = (typeof COUNT_MODES)[number];

const limit = queryInteger(1, RECORD_LIMIT_MAX, RECORD_LIMIT_DEFAULT).describe(
  `Records per page, 1-${RECORD_LIMIT_MAX}. A page whose records hold more than ` +
    `${mebibytes(PAGE_MAX_BYTES)} of values (as stored JSON) answers 400 on \`limit\`: ask for ` +
    "fewer records. A page must fit the services' memory",
);
const offset = queryInteger(0, RECORD_OFFSET_MAX, 0).describe("Records to skip, in `sort` order");

const count = z
  .preprocess(once, oneOf(COUNT_MODES).default("exact"))
  .describe(
    "How `total` is counted: `exact` (the default) counts every match; `estimated` is exact up " +
      "to 1,000 matches and PostgreSQL's estimate above, with `total_estimated: true`; `none` " +
      "makes no count (`total` is null), the cheapest page",
  );

/**
 * `response_format` with its default: ids on the REST routes; the MCP tools read names by
 * default, which a model reads without looking the ids up.
 */
export function responseFormatParameter(fallback: ResponseFormatName) {
  return z
    .preprocess(once, oneOf(RESPONSE_FORMATS).default(fallback))
    .describe(
      fallback === "ids"
        ? 'Keys of `data`: field ids as decimal strings (`"12"`, the default) or field names'
        : 'Keys of `data`: field names (the default) or field ids as decimal strings (`"12"`)',
    );
}

const responseFormat = responseFormatParameter("ids");

const richText = z
  .preprocess(once, oneOf(RICH_TEXT_FORMATS).optional())
  .describe(
    "How long_text values come out: `markdown` as stored (the default), `html` rendered and " +
      "sanitised, `plain` text only. A page whose long texts take over 2 s to render answers " +
      "400: ask for fewer records or for markdown",
  );

const where = queryText(WHERE_MAX_LENGTH)
  .optional()
  .transform((text) => text ?? "")
  .describe(
    "A filter, e.g. `(Status,eq,Active)~and((Age,gte,18)~or(Vip,checked))`; " +
      "empty or absent: every record",
  );

/**
 * `sort` and `fields` as the client wrote them, passed on whole: the records service reads the
 * list and reports problems at the positions the client sees. Empty or absent: none.
 */
function referenceList(description: string) {
  return queryText(REFERENCE_LIST_MAX_LENGTH)
    .optional()
    .transform((text) => text ?? "")
    .describe(description);
}

const fields = referenceList(
  "Comma-separated field ids or names; only these appear in `data`. A name holding a comma is " +
    'double-quoted (`Name,"Size, net"`). Empty or absent: every field',
);

const sort = referenceList(
  "Comma-separated field ids or names, `-` before one for descending; `row_id`, `created_at` " +
    "and `updated_at` too. Ties break by `row_id`; nulls last ascending, first descending. " +
    "Empty or absent: `row_id` ascending",
);

/** The options of a single-record read (GET one record). */
const readOptions = { response_format: responseFormat, rich_text: richText, fields };

/** The options of a list read. */
const listOptions = {
  limit,
  offset,
  count,
  response_format: responseFormat,
  rich_text: richText,
  where,
  fields,
  sort,
};

const databaseId = queryId.describe("The database that holds the table");
const tableId = queryId.describe("The table");
const rowId = queryId.describe("The record");

/** Path parameters of the v1 routes. */

export const TablePath = z.strictObject({ database_id: databaseId, table_id: tableId });

export const RecordPath = z.strictObject({
  database_id: databaseId,
  table_id: tableId,
  row_id: rowId,
});

/**
 * `row_id` in a v1 path: any one segment but `batch` and `batch_delete`, which name the batch
 * routes. Whatever else stands there is read as an id by the rule of every id (`queryId`), so a
 * word or a sign answers the 400 validation envelope on `row_id`, as a bad database or table id
 * in the same path does.
 */
export const ROW_ID_PATTERN = "(?!(?:batch|batch_delete)$)[^\\/]+?";

/** Query strings of the v1 routes. */

export const V1ListQuery = z.strictObject(listOptions);
export const V1GetQuery = z.strictObject(readOptions);

/** Query strings of the query-form routes (`/public/record/...`). */

export const PublicListQuery = z.strictObject({
  database_id: databaseId,
  table_id: tableId,
  ...listOptions,
});

export const PublicGetQuery = z.strictObject({
  table_id: tableId,
  row_id: rowId,
  database_id: queryId
    .optional()
    .describe("When given, the table must be in this database, else 404 `table_not_found`"),
  ...readOptions,
});

export const PublicTableQuery = z.strictObject({ table_id: tableId });

export const PublicRowQuery = z.strictObject({ table_id: tableId, row_id: rowId });

/** Request bodies, named as /openapi.json names them. */

/**
 * Record values. A bad value is keyed by the reference as sent, as the records service
 * keys every other bad value (`records.N.data.<reference>` in a batch); so the values the gateway
 * refuses itself (a number JSON.parse made infinite, nesting too deep) are keyed by the reference
 * they are under, not by the path inside them.
 */
const data = z
  .preprocess(
    (values, ctx) => {
      // One item per reference, as the records service lists one per bad key, however many
      // values inside it (a json field's) are refused.
      const refused = new Set<PropertyKey>();
      for (const issue of jsonObject.safeParse(values).error?.issues ?? []) {
        const path = issue.path.slice(0, 1);
        if (refused.has(path[0] as PropertyKey)) continue;
        refused.add(path[0] as PropertyKey);
        ctx.addIssue({ code: "custom", message: issue.message, path, input: values });
      }
      return values;
    },
    // Reached only by a value jsonObject took; the document still reads `type: object`.
    checkedObject(),
  )
  .describe(
    "Values keyed by field id (all digits) or field name. Unknown and read-only fields and " +
      "values of the wrong type answer 400 with one `extra` item per key, and nothing is " +
      `written. A record's values may come to at most ${mebibytes(RECORD_MAX_BYTES)} as stored ` +
      "JSON; a write past it answers 400 on `data` (`records.N.data` in a batch): a long text " +
      "holds up to 100,000 characters, in up to 500 fields, and every read builds its records " +
      "whole in memory",
  );

const batchMessage = `must have 1-${RECORD_BATCH_MAX} items`;

/** The records service's bound on what a batch reads whole: said per route. */
const WHOLE_BATCH =
  `More than ${Math.floor(PAGE_MAX_BYTES / RECORD_MAX_BYTES)} records holding more than ` +
  `${mebibytes(PAGE_MAX_BYTES)} of values (as stored JSON) answer 400 on this key:`;

function batch<S extends z.ZodType>(item: S) {
  return z.array(item).min(1, batchMessage).max(RECORD_BATCH_MAX, batchMessage);
}

/**
 * A bad value of a single record is keyed by the reference as sent (`N`), as the
 * records service keys it, where `data` alone would come out keyed `data.N`.
 */
function keyedByReference<S extends z.ZodType>(schema: S) {
  return z.preprocess((body, ctx) => {
    if (!isPlainObject(body) || !isPlainObject(body.data)) return body;
    const values = body.data;
    const refused = data.safeParse(values).error?.issues ?? [];
    if (refused.length === 0) return body;
    for (const issue of refused) {
      ctx.addIssue({ code: "custom", message: issue.message, path: issue.path, input: values });
    }
    // These issues stop `schema` from running; the body's other bad keys are still listed, as
    // the envelope lists every bad key, from the body checked with values it takes.
    const rest = schema.safeParse({ ...body, data: {} }, { reportInput: true });
    for (const issue of rest.error?.issues ?? []) ctx.addIssue({ ...issue });
    return body;
  }, schema);
}

export const PublicCreateBody = requestBody(
  "PublicCreateBody",
  keyedByReference(z.strictObject({ data })),
  "The new record's values; fields left out take their default or stay empty.",
);

export const PublicUpdateBody = requestBody(
  "PublicUpdateBody",
  keyedByReference(z.strictObject({ data })),
  "Only the fields named change (a partial update); `null` empties a field.",
);

export const PublicBatchCreateBody = requestBody(
  "PublicBatchCreateBody",
  z.strictObject({
    records: batch(z.strictObject({ data })).describe("Created in this order, all or none"),
  }),
);

export const PublicBatchUpdateBody = requestBody(
  "PublicBatchUpdateBody",
  z.strictObject({
    records: batch(z.strictObject({ row_id: bodyId.describe("The record"), data })).describe(
      `Each record's changes, applied all or none. ${WHOLE_BATCH} update fewer at once`,
    ),
  }),
);

export const PublicBatchDeleteBody = requestBody(
  "PublicBatchDeleteBody",
  z.strictObject({
    row_ids: batch(bodyId).describe(
      `The records to delete, all or none. ${WHOLE_BATCH} delete fewer at once`,
    ),
  }),
);

/** Response `data` of the record routes. */

const id = z.number().int();
const time = z.iso.datetime();

export const RecordSchema = responseData(
  "Record",
  z.object({
    row_id: id,
    table_id: id,
    created_at: time,
    updated_at: time,
    data: z
      .record(z.string(), z.unknown())
      .describe(
        "One key per field of the table (or of `fields`): the field id as a decimal string, or " +
          "its name with `response_format=names`. An empty cell is `null`, never left out",
      ),
    links_truncated: z
      .array(z.string())
      .optional()
      .describe(
        "The link fields (keyed as `data`) whose values show only their first 1000 linked " +
          "records; absent when none was cut",
      ),
  }),
);

/** `{"record"}`: what create and update answer. */
export const PublicRecordSchema = responseData("PublicRecord", z.object({ record: RecordSchema }));

/** `{"record"}`: what get answers. */
export const PublicGetSchema = responseData("PublicGet", z.object({ record: RecordSchema }));

/** A page of records and the count of all that match. */
export const PublicListSchema = responseData(
  "PublicList",
  z.object({
    records: z.array(RecordSchema),
    total: z
      .number()
      .int()
      .min(0)
      .nullable()
      .describe("Every record that matches `where`; null with `count=none`"),
    total_estimated: z
      .literal(true)
      .optional()
      .describe("Present when `total` is PostgreSQL's estimate (`count=estimated`, over 1,000)"),
    has_more: z.boolean().describe("Whether another page follows this one"),
    limit: z.number().int().describe("The page size applied"),
    offset: z.number().int().describe("The offset applied"),
  }),
);

/** The id of the deleted record. */
export const PublicDeleteSchema = responseData(
  "PublicDelete",
  z.object({ deleted_id: id.describe("The row_id of the deleted record") }),
);

export const PublicBatchRecordsSchema = responseData(
  "PublicBatchRecords",
  z.object({ records: z.array(RecordSchema).describe("In request order") }),
);

export const PublicBatchDeleteSchema = responseData(
  "PublicBatchDelete",
  z.object({ deleted_ids: z.array(id).describe("In request order") }),
);

/** The per-table OpenAPI document's query: which keys its reads and request bodies use. */
export const TableOpenApiQuery = z.strictObject({
  response_format: responseFormatParameter("ids").describe(
    "`names`: a document whose reads and request bodies are keyed by field name (writes still " +
      "answer keyed by id); `ids` (the default): keyed by field id",
  ),
});

/** The per-table OpenAPI document, served as is (no envelope). */
export const TableOpenApiDocumentSchema = responseData(
  "TableOpenApiDocument",
  z
    .record(z.string(), z.unknown())
    .describe(
      "An OpenAPI 3.1 document of this table's record routes with its real fields and types",
    ),
);

/** The read options a table's change feed and stream take (routes/change). */
export const changeReadOptions = {
  response_format: responseFormat,
  rich_text: richText,
  where: where.describe(
    "A filter on the record after the change (before it, for a deletion), e.g. " +
      "`(Status,eq,Active)`; empty or absent: every change",
  ),
  fields,
};
