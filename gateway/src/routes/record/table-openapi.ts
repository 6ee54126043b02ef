import { createHash } from "node:crypto";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import {
  mebibytes,
  PAGE_MAX_BYTES,
  RECORD_BATCH_MAX,
  RECORD_LIMIT_DEFAULT,
  RECORD_LIMIT_MAX,
  RECORD_OFFSET_MAX,
  REFERENCE_LIST_MAX_LENGTH,
  WHERE_MAX_CONDITIONS,
  WHERE_MAX_DEPTH,
  WHERE_MAX_LENGTH,
  WHERE_OPERATORS,
} from "@rowbase/kit";
import type { TableRecordSchema } from "@rowbase/proto/rowbase/records/v1/records_pb";
import { fieldTypeName } from "../../presentation/field-types.js";
import { errorResponses, errorSchemas } from "../../routing/openapi.js";
import type { HttpMethod, Route } from "../../routing/route.js";
import { MAX_ID } from "../../validation/fields.js";
import type { ResponseFormatName } from "./record-schemas.js";

/** The table a document describes: the ids its paths are pinned to. */
export interface DocumentedTable {
  tableId: bigint;
  databaseId: bigint;
}

const ref = (name: string): JsonObject => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: JsonObject): JsonObject => ({
  content: { "application/json": { schema } },
});

/** `{"message": "success", "data": <data>}`. */
function success(description: string, data: JsonObject): JsonObject {
  return {
    description,
    ...json({
      type: "object",
      required: ["message", "data"],
      properties: { message: { const: "success" }, data },
    }),
  };
}

function integerParameter(
  name: string,
  location: "path" | "query",
  value: bigint,
  description: string,
): JsonObject {
  return {
    name,
    in: location,
    required: true,
    description,
    schema: { type: "integer", format: "int64", enum: [Number(value)], default: Number(value) },
  };
}

/** A record's id: ids stay below 2^53, so that every JSON client reads them exactly. */
const ROW_ID: JsonObject = {
  type: "integer",
  format: "int64",
  minimum: 1,
  maximum: MAX_ID,
};

const ROW_ID_PARAMETER = (location: "path" | "query"): JsonObject => ({
  name: "row_id",
  in: location,
  required: true,
  schema: ROW_ID,
});

/**
 * `response_format`, fixed to the document's: its reads are described keyed one way only, so
 * that a generated client reads `data` without a cast. The names form is required, since a read
 * without it answers keyed by id.
 */
function responseFormatParameter(format: ResponseFormatName): JsonObject {
  return format === "names"
    ? {
        name: "response_format",
        in: "query",
        required: true,
        description:
          "Keys of `data`: field names. This document is the one asked for with `response_format=names`; the default document describes reads keyed by field id.",
        schema: { type: "string", enum: ["names"] },
      }
    : {
        name: "response_format",
        in: "query",
        description:
          "Keys of `data`: field ids as decimal strings. The document asked for with `response_format=names` describes reads keyed by field name.",
        schema: { type: "string", enum: ["ids"], default: "ids" },
      };
}

function readParameters(schema: TableRecordSchema, format: ResponseFormatName): JsonObject[] {
  const names = schema.fields.map((f) => f.name);
  return [
    responseFormatParameter(format),
    {
      name: "rich_text",
      in: "query",
      description:
        "How long_text values come out: as stored (`markdown`), rendered and sanitised (`html`) or as text only (`plain`). A page whose long texts take over 2 s to render answers 400: ask for fewer records or for markdown.",
      schema: { type: "string", enum: ["markdown", "html", "plain"], default: "markdown" },
    },
    {
      name: "fields",
      in: "query",
      description: `Comma-separated field references (id or name; a name holding a comma in double quotes): only these appear in \`data\`. Fields: ${names.join(", ")}.`,
      schema: { type: "string", maxLength: REFERENCE_LIST_MAX_LENGTH },
    },
  ];
}

function listParameters(schema: TableRecordSchema, format: ResponseFormatName): JsonObject[] {
  const sortable = schema.fields.filter((f) => f.sortable).map((f) => f.name);
  return [
    {
      name: "limit",
      in: "query",
      description: `A page whose records hold more than ${mebibytes(PAGE_MAX_BYTES)} of values answers 400 on \`limit\`: ask for fewer records.`,
      schema: {
        type: "integer",
        minimum: 1,
        maximum: RECORD_LIMIT_MAX,
        default: RECORD_LIMIT_DEFAULT,
      },
    },
    {
      name: "offset",
      in: "query",
      schema: { type: "integer", minimum: 0, maximum: RECORD_OFFSET_MAX, default: 0 },
    },
    {
      name: "count",
      in: "query",
      description:
        "How `total` is counted: `exact` counts every match; `estimated` is exact up to 1,000 matches and PostgreSQL's estimate above, with `total_estimated: true`; `none` makes no count (`total` is null), the cheapest page.",
      schema: { type: "string", enum: ["exact", "estimated", "none"], default: "exact" },
    },
    {
      name: "where",
      in: "query",
      description: [
        'A filter: `(ref,op[,value])` conditions joined by `~and` / `~or` (~and binds tighter), negated with `~not`, grouped with parentheses; values may be double-quoted (`""` is a quote).',
        `Operators: ${WHERE_OPERATORS.join(", ")}. Dates also take today, yesterday, tomorrow, daysAgo:N, daysFromNow:N (UTC).`,
        `At most ${WHERE_MAX_LENGTH} characters, depth ${WHERE_MAX_DEPTH}, ${WHERE_MAX_CONDITIONS} conditions.`,
        "Example: `(Status,eq,Active)~and((Age,gte,18)~or(Vip,checked))`.",
      ].join(" "),
      schema: { type: "string", maxLength: WHERE_MAX_LENGTH },
    },
    {
      name: "sort",
      in: "query",
      description: `Comma-separated references, \`-\` before one for descending; ties break by row_id; nulls last ascending, first descending. Sortable: ${[...sortable, "row_id", "created_at", "updated_at"].join(", ")}.`,
      schema: { type: "string", maxLength: REFERENCE_LIST_MAX_LENGTH },
    },
    ...readParameters(schema, format),
  ];
}

/**
 * A data schema with an example record beside its fields' own examples (the records service
 * gives each field one), which documentation pages and tools show as a sample.
 */
function withExample(data: JsonObject | undefined): JsonObject {
  if (!data) return {};
  const example: JsonObject = {};
  for (const [key, value] of Object.entries((data.properties ?? {}) as JsonObject)) {
    const examples = (value as JsonObject | null)?.examples;
    if (Array.isArray(examples) && examples.length > 0) {
      Object.defineProperty(example, key, { value: examples[0], enumerable: true });
    }
  }
  return { ...data, examples: [example] };
}

function components(schema: TableRecordSchema, format: ResponseFormatName): JsonObject {
  const record = (data: string, keyed: string): JsonObject => ({
    type: "object",
    description: `A record, its values keyed by ${keyed}.`,
    required: ["row_id", "table_id", "created_at", "updated_at", "data"],
    properties: {
      row_id: { type: "integer", format: "int64" },
      table_id: { type: "integer", format: "int64" },
      created_at: { type: "string", format: "date-time" },
      updated_at: { type: "string", format: "date-time" },
      data: ref(data),
      links_truncated: {
        type: "array",
        items: { type: "string" },
        description: `The link fields, keyed by ${keyed}, whose values show only their first 1000 linked records; absent when none was cut.`,
      },
    },
  });
  const byName = format === "names";
  return {
    securitySchemes: {
      bearer: {
        type: "http",
        scheme: "bearer",
        description: "An API token (`rb_...`) of the table's organization, or a member's session.",
      },
    },
    schemas: {
      Record: record("RecordData", byName ? "field id (what writes answer)" : "field id"),
      RecordData: withExample(schema.readById),
      ...(byName
        ? {
            RecordByName: record("RecordDataByName", "field name (what reads answer)"),
            RecordDataByName: withExample(schema.readByName),
          }
        : {}),
      RecordCreateData: withExample(byName ? schema.createByName : schema.createById),
      RecordUpdateData: withExample(byName ? schema.updateByName : schema.updateById),
      ...(errorSchemas() as JsonObject),
    },
    headers: {
      ETag: {
        description: "The document's version, quoted: it changes when the document does.",
        schema: { type: "string" },
      },
    },
  };
}

/**
 * What the document says of the table, as a version: it changes whenever a field is added,
 * renamed, retyped or given other options, or the table renamed, so that a client generated
 * from it can tell that its types are stale.
 */
export function schemaVersion(schema: TableRecordSchema): string {
  const described = JSON.stringify(schema, (_key, value: unknown) =>
    typeof value === "bigint" ? value.toString() : value,
  );
  return `1.0.0+${createHash("sha256").update(described).digest("hex").slice(0, 12)}`;
}

/**
 * An OpenAPI 3.1 document of one table's record routes, both families (the v1 paths and the
 * query form), with the table's real field names and value schemas as the records service
 * describes them, read-only fields marked, and the list parameters. Each operation answers the
 * errors its route in `routes` answers, as /openapi.json gives them.
 *
 * Every schema is keyed one way, so that a generated client reads values without a cast: by
 * field id (`format` ids), or (`names`) reads and request bodies by field name. Writes answer
 * keyed by field id in both, as the routes do.
 */
export function tableOpenApi(
  schema: TableRecordSchema,
  table: DocumentedTable,
  routes: readonly Route[],
  baseUrl: string,
  format: ResponseFormatName = "ids",
): JsonObject {
  const v1 = `/public/v1/databases/{database_id}/tables/{table_id}`;
  const responses = (method: HttpMethod, template: string, ok: JsonObject): JsonObject => {
    const path = template.replace(/\{(\w+)\}/g, ":$1");
    const route = routes.find((r) => r.method === method && r.path === path);
    if (!route) throw new Error(`no route serves ${method} ${template}`);
    return { "200": ok, ...(errorResponses(route) as JsonObject) };
  };
  const pathIds = [
    integerParameter("database_id", "path", table.databaseId, "This table's database."),
    integerParameter("table_id", "path", table.tableId, "This table."),
  ];
  const queryTable = integerParameter("table_id", "query", table.tableId, "This table.");
  const queryDatabase = (required: boolean): JsonObject => ({
    ...integerParameter("database_id", "query", table.databaseId, "This table's database."),
    required,
  });
  const security: JsonValue = [{ bearer: [] }];
  const op = (operation: JsonObject): JsonObject => ({ security, ...operation });
  const createBody = (key: string): JsonObject => ({
    required: true,
    ...json({
      type: "object",
      required: [key],
      additionalProperties: false,
      properties: { [key]: ref("RecordCreateData") },
    }),
  });
  const updateBody: JsonObject = {
    required: true,
    ...json({
      type: "object",
      required: ["data"],
      additionalProperties: false,
      properties: { data: ref("RecordUpdateData") },
    }),
  };
  const batchBody = (key: string, items: JsonObject): JsonObject => ({
    required: true,
    ...json({
      type: "object",
      required: [key],
      additionalProperties: false,
      properties: {
        [key]: { type: "array", minItems: 1, maxItems: RECORD_BATCH_MAX, items },
      },
    }),
  });
  const readRecord = ref(format === "names" ? "RecordByName" : "Record");
  const recordAnswer = (description: string, record = ref("Record")) =>
    success(description, {
      type: "object",
      required: ["record"],
      properties: { record },
    });
  const listAnswer = success("A page of records", {
    type: "object",
    required: ["records", "total", "has_more", "limit", "offset"],
    properties: {
      records: { type: "array", items: readRecord },
      total: {
        type: ["integer", "null"],
        description: "Every record that matches `where`; null with `count=none`.",
      },
      total_estimated: {
        const: true,
        description: "Present when `total` is PostgreSQL's estimate (`count=estimated`).",
      },
      has_more: { type: "boolean", description: "Whether another page follows this one." },
      limit: { type: "integer" },
      offset: { type: "integer" },
    },
  });
  const deleteAnswer = success("Deleted", {
    type: "object",
    required: ["deleted_id"],
    properties: { deleted_id: { type: "integer", format: "int64" } },
  });
  const recordsAnswer = (description: string) =>
    success(description, {
      type: "object",
      required: ["records"],
      properties: { records: { type: "array", items: ref("Record") } },
    });

  return {
    openapi: "3.1.0",
    info: {
      title: `Rowbase table ${schema.tableName}`,
      version: schemaVersion(schema),
      description: `${format === "names" ? "Reads and request bodies keyed by field name; writes answer keyed by field id." : "Values keyed by field id (decimal strings); the document asked for with `response_format=names` keys reads and request bodies by field name."} \`info.version\` changes whenever the table's schema does. The record routes of table ${table.tableId} (database ${table.databaseId}) with its fields: ${schema.fields.map((f) => `${f.name} (${fieldTypeName(f.type)}, id ${f.fieldId})`).join(", ")}. A method not listed for a path answers 405 \`method_not_allowed\`: PUT does not replace records, PATCH changes them. The rules behind these routes (the query language, limits, errors) are in the API reference, \`docs/routes/records.md\` in the project.`,
    },
    ...(baseUrl ? { servers: [{ url: baseUrl }] } : {}),
    security,
    paths: {
      [`${v1}/records`]: {
        parameters: pathIds,
        get: op({
          operationId: "listRecords",
          summary: "List records",
          parameters: listParameters(schema, format),
          responses: responses("GET", `${v1}/records`, listAnswer),
        }),
        post: op({
          operationId: "createRecord",
          summary: "Create a record",
          requestBody: createBody("data"),
          responses: responses(
            "POST",
            `${v1}/records`,
            recordAnswer("The created record, keyed by field id"),
          ),
        }),
      },
      [`${v1}/records/{row_id}`]: {
        parameters: [...pathIds, ROW_ID_PARAMETER("path")],
        get: op({
          operationId: "getRecord",
          summary: "Get a record",
          parameters: readParameters(schema, format),
          responses: responses(
            "GET",
            `${v1}/records/{row_id}`,
            recordAnswer("The record", readRecord),
          ),
        }),
        patch: op({
          operationId: "updateRecord",
          summary: "Change the named fields of a record",
          requestBody: updateBody,
          responses: responses(
            "PATCH",
            `${v1}/records/{row_id}`,
            recordAnswer("The updated record, keyed by field id"),
          ),
        }),
        delete: op({
          operationId: "deleteRecord",
          summary: "Delete a record",
          responses: responses("DELETE", `${v1}/records/{row_id}`, deleteAnswer),
        }),
      },
      [`${v1}/records/batch`]: {
        parameters: pathIds,
        post: op({
          operationId: "batchCreateRecords",
          summary: `Create 1-${RECORD_BATCH_MAX} records, all or none`,
          requestBody: batchBody("records", {
            type: "object",
            required: ["data"],
            additionalProperties: false,
            properties: { data: ref("RecordCreateData") },
          }),
          responses: responses(
            "POST",
            `${v1}/records/batch`,
            recordsAnswer("The created records in request order"),
          ),
        }),
        patch: op({
          operationId: "batchUpdateRecords",
          summary: `Change 1-${RECORD_BATCH_MAX} records, all or none`,
          requestBody: batchBody("records", {
            type: "object",
            required: ["row_id", "data"],
            additionalProperties: false,
            properties: { row_id: ROW_ID, data: ref("RecordUpdateData") },
          }),
          responses: responses(
            "PATCH",
            `${v1}/records/batch`,
            recordsAnswer("The updated records in request order"),
          ),
        }),
      },
      [`${v1}/records/batch_delete`]: {
        parameters: pathIds,
        post: op({
          operationId: "batchDeleteRecords",
          summary: `Delete 1-${RECORD_BATCH_MAX} records, all or none (an unknown id deletes nothing: 404)`,
          requestBody: batchBody("row_ids", ROW_ID),
          responses: responses(
            "POST",
            `${v1}/records/batch_delete`,
            success("Deleted", {
              type: "object",
              required: ["deleted_ids"],
              properties: {
                deleted_ids: { type: "array", items: { type: "integer", format: "int64" } },
              },
            }),
          ),
        }),
      },
      [`${v1}/openapi.json`]: {
        parameters: pathIds,
        get: op({
          operationId: "getTableOpenApi",
          summary: "This document",
          parameters: [
            {
              name: "response_format",
              in: "query",
              description:
                "`names`: the document whose reads and request bodies are keyed by field name.",
              schema: { type: "string", enum: ["ids", "names"], default: "ids" },
            },
          ],
          responses: {
            ...responses("GET", `${v1}/openapi.json`, {
              description: "An OpenAPI 3.1 document, without an envelope",
              headers: { ETag: { $ref: "#/components/headers/ETag" } },
              ...json({
                type: "object",
                required: ["openapi", "info", "paths"],
                properties: {
                  openapi: { type: "string", pattern: "^3\\.1\\." },
                  info: { type: "object" },
                  paths: { type: "object" },
                },
              }),
            }),
            "304": {
              description:
                "`If-None-Match` names the document's ETag: it has not changed (no body)",
              headers: { ETag: { $ref: "#/components/headers/ETag" } },
            },
          },
        }),
      },
      "/public/record/create": {
        post: op({
          operationId: "publicCreateRecord",
          summary: "Create a record (query form)",
          parameters: [queryTable],
          requestBody: createBody("data"),
          responses: responses(
            "POST",
            "/public/record/create",
            recordAnswer("The created record, keyed by field id"),
          ),
        }),
      },
      "/public/record/get": {
        get: op({
          operationId: "publicGetRecord",
          summary: "Get a record (query form)",
          parameters: [
            queryTable,
            ROW_ID_PARAMETER("query"),
            queryDatabase(false),
            ...readParameters(schema, format),
          ],
          responses: responses("GET", "/public/record/get", recordAnswer("The record", readRecord)),
        }),
      },
      "/public/record/list": {
        get: op({
          operationId: "publicListRecords",
          summary: "List records (query form)",
          parameters: [queryDatabase(true), queryTable, ...listParameters(schema, format)],
          responses: responses("GET", "/public/record/list", listAnswer),
        }),
      },
      "/public/record/update": {
        put: op({
          operationId: "publicUpdateRecord",
          summary: "Change the named fields of a record (query form)",
          parameters: [queryTable, ROW_ID_PARAMETER("query")],
          requestBody: updateBody,
          responses: responses(
            "PUT",
            "/public/record/update",
            recordAnswer("The updated record, keyed by field id"),
          ),
        }),
      },
      "/public/record/delete": {
        post: op({
          operationId: "publicDeleteRecord",
          summary: "Delete a record (query form)",
          parameters: [queryTable, ROW_ID_PARAMETER("query")],
          responses: responses("POST", "/public/record/delete", deleteAnswer),
        }),
        delete: op({
          operationId: "publicDeleteRecordByDelete",
          summary: "Delete a record (query form)",
          parameters: [queryTable, ROW_ID_PARAMETER("query")],
          responses: responses("DELETE", "/public/record/delete", deleteAnswer),
        }),
      },
    },
    components: components(schema, format),
  };
}
