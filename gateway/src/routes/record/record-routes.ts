import { createHash } from "node:crypto";
import type { Client } from "@connectrpc/connect";
import type { TableRecordSchema } from "@rowbase/proto/rowbase/records/v1/records_pb";
import type { RecordsService } from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import type { z } from "zod";
import type { ErrorCode } from "../../errors/error-table.js";
import type { ApiCallQuota } from "../../quota/api-call-quota.js";
import type { RateLimitName } from "../../rate-limit/rate-limit-settings.js";
import { Answered, defineRoute, type Route, type RouteInput } from "../../routing/route.js";
import { ifNoneMatchHits } from "../file/file-serving.js";
import { type RecordCall, RecordOperations } from "./record-operations.js";
import {
  PublicBatchCreateBody,
  PublicBatchDeleteBody,
  PublicBatchDeleteSchema,
  PublicBatchRecordsSchema,
  PublicBatchUpdateBody,
  PublicCreateBody,
  PublicDeleteSchema,
  PublicGetQuery,
  PublicGetSchema,
  PublicListQuery,
  PublicListSchema,
  PublicRecordSchema,
  PublicRowQuery,
  PublicTableQuery,
  PublicUpdateBody,
  RecordPath,
  type ResponseFormatName,
  ROW_ID_PATTERN,
  TableOpenApiDocumentSchema,
  TableOpenApiQuery,
  TablePath,
  V1GetQuery,
  V1ListQuery,
} from "./record-schemas.js";
import { type DocumentedTable, tableOpenApi } from "./table-openapi.js";

export interface RecordRoutesDeps {
  records: Client<typeof RecordsService>;
  quota: ApiCallQuota;
  /** `PUBLIC_BASE_URL`, the server of the per-table OpenAPI documents. */
  publicBaseUrl: string;
}

/** The v1 paths: the database, table and record in the path. */
export const V1_TABLE_PATH = "/public/v1/databases/:database_id/tables/:table_id";
export const V1_RECORDS_PATH = `${V1_TABLE_PATH}/records`;
export const V1_RECORD_PATH = `${V1_RECORDS_PATH}/:row_id`;

const v1Tags = ["Records (v1)"];
const queryFormTags = ["Records (query form)"];

/** 20 requests/s per token, burst 40; a member's session the same per user. */
const rateLimits: RateLimitName[] = ["records_token", "records_user"];

/** Every record route can answer these (the 400 validation shape and 401 come with any route). */
const COMMON: ErrorCode[] = ["table_not_found", "api_call_limit_exceeded"];
const READ_ONE: ErrorCode[] = [...COMMON, "record_not_found"];
const WRITE: ErrorCode[] = [...COMMON, "organization_forbidden", "token_read_only"];
const CREATE: ErrorCode[] = [...WRITE, "record_limit_exceeded"];
const WRITE_EXISTING: ErrorCode[] = [...WRITE, "record_not_found"];

const AUTH_DESCRIPTION =
  "Takes an API token (`read` may read, `read_write` may also write) or a member's session. " +
  "Each call counts toward the organization's monthly `api_calls_per_month`.";

/** The parts of a handler's input a record operation needs. */
function recordCall(input: RouteInput<"session_or_token", unknown, unknown, unknown>): RecordCall {
  return { caller: input.caller, call: input.call, ctx: input.ctx };
}

/**
 * The records of a table through two route families that share one implementation
 * (RecordOperations). The v1 REST routes take the database, table and record from the path; PUT
 * on them is 405, and `row_id` never matches `batch` or `batch_delete`, so `/records/batch` and
 * `/records/batch_delete` are their own routes. The query-form routes (`/public/record/...`)
 * take them from the query string; delete answers POST and DELETE alike. The table's OpenAPI
 * document is rendered here from what the records service says of its records, with the errors
 * these routes answer.
 */
export function recordRoutes(deps: RecordRoutesDeps): Route[] {
  const records = new RecordOperations(deps);
  const routes: Route[] = [
    ...v1Routes(records, (schema, table, format) =>
      tableOpenApi(schema, table, routes, deps.publicBaseUrl, format),
    ),
    ...queryFormRoutes(records),
  ];
  return routes;
}

/** A table's OpenAPI document, rendered from what its records hold. */
type TableDocument = (
  schema: TableRecordSchema,
  table: DocumentedTable,
  format: ResponseFormatName,
) => z.output<typeof TableOpenApiDocumentSchema>;

function v1Routes(records: RecordOperations, tableDocument: TableDocument): Route[] {
  return [
    defineRoute({
      method: "GET",
      path: V1_RECORDS_PATH,
      operationId: "v1RecordList",
      summary: "A page of the table's records, filtered and sorted",
      description: AUTH_DESCRIPTION,
      tags: v1Tags,
      auth: "session_or_token",
      rateLimits,
      params: TablePath,
      query: V1ListQuery,
      response: PublicListSchema,
      errors: COMMON,
      handle: (input) =>
        records.list(
          { tableId: input.params.table_id, databaseId: input.params.database_id },
          input.query,
          recordCall(input),
        ),
    }),
    defineRoute({
      method: "GET",
      path: V1_RECORD_PATH,
      paramPatterns: { row_id: ROW_ID_PATTERN },
      operationId: "v1RecordGet",
      summary: "One record",
      description: AUTH_DESCRIPTION,
      tags: v1Tags,
      auth: "session_or_token",
      rateLimits,
      params: RecordPath,
      query: V1GetQuery,
      response: PublicGetSchema,
      errors: READ_ONE,
      handle: (input) =>
        records.get(
          { tableId: input.params.table_id, databaseId: input.params.database_id },
          input.params.row_id,
          input.query,
          recordCall(input),
        ),
    }),
    defineRoute({
      method: "POST",
      path: V1_RECORDS_PATH,
      operationId: "v1RecordCreate",
      summary: "Create a record",
      description: AUTH_DESCRIPTION,
      tags: v1Tags,
      auth: "session_or_token",
      rateLimits,
      params: TablePath,
      body: PublicCreateBody,
      response: PublicRecordSchema,
      errors: CREATE,
      handle: (input) =>
        records.create(
          { tableId: input.params.table_id, databaseId: input.params.database_id },
          input.body.data,
          recordCall(input),
        ),
    }),
    // `row_id` never matches `batch` or `batch_delete`, so these stay apart from the record routes.
    defineRoute({
      method: "POST",
      path: `${V1_RECORDS_PATH}/batch`,
      operationId: "v1RecordBatchCreate",
      summary: "Create 1-1000 records, all or none",
      description: AUTH_DESCRIPTION,
      tags: v1Tags,
      auth: "session_or_token",
      rateLimits,
      params: TablePath,
      body: PublicBatchCreateBody,
      response: PublicBatchRecordsSchema,
      errors: CREATE,
      handle: (input) =>
        records.batchCreate(
          { tableId: input.params.table_id, databaseId: input.params.database_id },
          input.body.records,
          recordCall(input),
        ),
    }),
    defineRoute({
      method: "PATCH",
      path: `${V1_RECORDS_PATH}/batch`,
      operationId: "v1RecordBatchUpdate",
      summary: "Change 1-1000 records, all or none",
      description: `${AUTH_DESCRIPTION} Only the fields named in each \`data\` change.`,
      tags: v1Tags,
      auth: "session_or_token",
      rateLimits,
      params: TablePath,
      body: PublicBatchUpdateBody,
      response: PublicBatchRecordsSchema,
      errors: WRITE_EXISTING,
      handle: (input) =>
        records.batchUpdate(
          { tableId: input.params.table_id, databaseId: input.params.database_id },
          input.body.records,
          recordCall(input),
        ),
    }),
    defineRoute({
      method: "POST",
      path: `${V1_RECORDS_PATH}/batch_delete`,
      operationId: "v1RecordBatchDelete",
      summary: "Delete 1-1000 records, all or none",
      description: AUTH_DESCRIPTION,
      tags: v1Tags,
      auth: "session_or_token",
      rateLimits,
      params: TablePath,
      body: PublicBatchDeleteBody,
      response: PublicBatchDeleteSchema,
      errors: WRITE_EXISTING,
      handle: (input) =>
        records.batchDelete(
          { tableId: input.params.table_id, databaseId: input.params.database_id },
          input.body.row_ids,
          recordCall(input),
        ),
    }),
    defineRoute({
      method: "PATCH",
      path: V1_RECORD_PATH,
      paramPatterns: { row_id: ROW_ID_PATTERN },
      operationId: "v1RecordUpdate",
      summary: "Change a record: only the fields named in `data`",
      description: `${AUTH_DESCRIPTION} PUT (a full replacement) is not supported: 405.`,
      tags: v1Tags,
      auth: "session_or_token",
      rateLimits,
      params: RecordPath,
      body: PublicUpdateBody,
      response: PublicRecordSchema,
      errors: WRITE_EXISTING,
      handle: (input) =>
        records.update(
          { tableId: input.params.table_id, databaseId: input.params.database_id },
          input.params.row_id,
          input.body.data,
          recordCall(input),
        ),
    }),
    defineRoute({
      method: "DELETE",
      path: V1_RECORD_PATH,
      paramPatterns: { row_id: ROW_ID_PATTERN },
      operationId: "v1RecordDelete",
      summary: "Delete a record",
      description: AUTH_DESCRIPTION,
      tags: v1Tags,
      auth: "session_or_token",
      rateLimits,
      params: RecordPath,
      response: PublicDeleteSchema,
      errors: WRITE_EXISTING,
      handle: (input) =>
        records.delete(
          { tableId: input.params.table_id, databaseId: input.params.database_id },
          input.params.row_id,
          recordCall(input),
        ),
    }),
    defineRoute({
      method: "GET",
      path: `${V1_TABLE_PATH}/openapi.json`,
      operationId: "v1TableOpenApi",
      summary: "An OpenAPI document of this table's record routes, with its real fields",
      description:
        `${AUTH_DESCRIPTION} The document itself is the body (no envelope), ready for code ` +
        "generators and API tools; its server is this gateway's public base URL. Its " +
        "`info.version` and `ETag` change whenever the table's schema does; `If-None-Match` " +
        "with the ETag held answers 304 while the document is unchanged.",
      tags: v1Tags,
      auth: "session_or_token",
      rateLimits,
      params: TablePath,
      query: TableOpenApiQuery,
      response: TableOpenApiDocumentSchema,
      raw: true,
      etag: true,
      errors: COMMON,
      handle: async (input) => {
        const table = { tableId: input.params.table_id, databaseId: input.params.database_id };
        const schema = await records.recordSchema(table, recordCall(input));
        const document = tableDocument(schema, table, input.query.response_format);
        const { ctx } = input;
        const etag = `"${createHash("sha256").update(JSON.stringify(document)).digest("base64url")}"`;
        ctx.set("ETag", etag);
        // Revalidated on every use: the schema can change at any time.
        ctx.set("Cache-Control", "private, no-cache");
        if (!ifNoneMatchHits(ctx.get("if-none-match") || undefined, etag)) return document;
        ctx.status = 304;
        return new Answered();
      },
    }),
  ];
}

function queryFormRoutes(records: RecordOperations): Route[] {
  const deleteRoute = (method: "POST" | "DELETE") =>
    defineRoute({
      method,
      path: "/public/record/delete",
      operationId: method === "POST" ? "publicRecordDelete" : "publicRecordDeleteByDelete",
      summary: "Delete a record (POST or DELETE)",
      description: AUTH_DESCRIPTION,
      tags: queryFormTags,
      auth: "session_or_token",
      rateLimits,
      query: PublicRowQuery,
      response: PublicDeleteSchema,
      errors: WRITE_EXISTING,
      handle: (input) =>
        records.delete({ tableId: input.query.table_id }, input.query.row_id, recordCall(input)),
    });
  return [
    defineRoute({
      method: "POST",
      path: "/public/record/create",
      operationId: "publicRecordCreate",
      summary: "Create a record",
      description: AUTH_DESCRIPTION,
      tags: queryFormTags,
      auth: "session_or_token",
      rateLimits,
      query: PublicTableQuery,
      body: PublicCreateBody,
      response: PublicRecordSchema,
      errors: CREATE,
      handle: (input) =>
        records.create({ tableId: input.query.table_id }, input.body.data, recordCall(input)),
    }),
    defineRoute({
      method: "GET",
      path: "/public/record/get",
      operationId: "publicRecordGet",
      summary: "One record",
      description: AUTH_DESCRIPTION,
      tags: queryFormTags,
      auth: "session_or_token",
      rateLimits,
      query: PublicGetQuery,
      response: PublicGetSchema,
      errors: READ_ONE,
      handle: (input) =>
        records.get(
          { tableId: input.query.table_id, databaseId: input.query.database_id },
          input.query.row_id,
          input.query,
          recordCall(input),
        ),
    }),
    defineRoute({
      method: "GET",
      path: "/public/record/list",
      operationId: "publicRecordList",
      summary: "A page of the table's records, filtered and sorted",
      description: AUTH_DESCRIPTION,
      tags: queryFormTags,
      auth: "session_or_token",
      rateLimits,
      query: PublicListQuery,
      response: PublicListSchema,
      errors: COMMON,
      handle: (input) =>
        records.list(
          { tableId: input.query.table_id, databaseId: input.query.database_id },
          input.query,
          recordCall(input),
        ),
    }),
    defineRoute({
      method: "PUT",
      path: "/public/record/update",
      operationId: "publicRecordUpdate",
      summary: "Change a record: only the fields named in `data`",
      description: `${AUTH_DESCRIPTION} A partial update, as PATCH on the v1 record route.`,
      tags: queryFormTags,
      auth: "session_or_token",
      rateLimits,
      query: PublicRowQuery,
      body: PublicUpdateBody,
      response: PublicRecordSchema,
      errors: WRITE_EXISTING,
      handle: (input) =>
        records.update(
          { tableId: input.query.table_id },
          input.query.row_id,
          input.body.data,
          recordCall(input),
        ),
    }),
    deleteRoute("POST"),
    deleteRoute("DELETE"),
  ];
}
