import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import {
  RECORD_BATCH_MAX,
  RECORD_LIMIT_DEFAULT,
  RECORD_LIMIT_MAX,
  RECORD_OFFSET_MAX,
  REFERENCE_LIST_MAX_LENGTH,
  WHERE_MAX_LENGTH,
} from "@rowbase/kit";
import { isReadOnlyType, jsonSchemaOf } from "@rowbase/kit/field-types";
import { OPERATORS } from "../query/index.js";
import type { SchemaField, TableSchema } from "../table-schema.js";

/**
 * The most bytes of values one record may store: the JSON text of its `data` as the write
 * statements send it. SPEC sets no bound, and its others allow tens of megabytes (long texts of
 * 100,000 characters, as Airtable's, in up to 500 fields, grown by patch after patch); every
 * read builds its records whole in the records service's and the gateway's memory.
 */
export const RECORD_MAX_BYTES = 2 * 1024 * 1024;
/**
 * The most bytes of values one list page sends, as PostgreSQL sends them
 * (`data` as text, which puts a space after each `:` and `,` and writes numbers out in full): a
 * page must fit the services' memory (256-512 MiB a pod) several times over, with other calls
 * running. About eight records at RECORD_MAX_BYTES fit.
 */
export const PAGE_MAX_BYTES = 16 * 1024 * 1024;

/** A bound in bytes as the documents and messages say it. */
export const mebibytes = (bytes: number) => `${bytes / (1024 * 1024)} MiB`;

/** Sets a key that may be any field name, "__proto__" included. */
function put(target: JsonObject, key: string, value: JsonValue): void {
  Object.defineProperty(target, key, {
    value,
    enumerable: true,
    writable: true,
    configurable: true,
  });
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

/**
 * What a route does, which decides its errors: reads never answer 403 (every member and token
 * may read), creates meet the plan's record limit, and the routes that name records answer
 * `record_not_found`. The same codes as the gateway's /openapi.json gives each route.
 */
type Access = "list" | "get" | "create" | "change";

/** An error answer `{"message": <one of codes>, "data": {...}}`. */
function failure(description: string, codes: string[]): JsonObject {
  return {
    description: `${description}: ${codes.map((code) => `\`${code}\``).join(", ")}`,
    ...json({
      type: "object",
      required: ["message", "data"],
      properties: {
        message: codes.length === 1 ? { const: codes[0]! } : { type: "string", enum: codes },
        data: { type: "object" },
      },
    }),
  };
}

function withErrors(responses: JsonObject, access: Access): JsonObject {
  const reads = access === "list" || access === "get";
  const forbidden = ["organization_forbidden", "token_read_only"];
  if (access === "create") forbidden.push("record_limit_exceeded");
  const notFound = ["table_not_found"];
  if (access === "get" || access === "change") notFound.push("record_not_found");
  return {
    ...responses,
    "400": { description: "Validation failed", ...json(ref("ValidationError")) },
    "401": failure("Missing or invalid credential", ["unauthorized"]),
    ...(reads ? {} : { "403": failure("Forbidden", forbidden) }),
    "404": failure("Not found", notFound),
    "408": failure("The request's body stopped arriving, or arrived too slowly", [
      "request_timeout",
    ]),
    "413": failure("A body over 1 MiB", ["payload_too_large"]),
    "429": {
      ...failure("Too many requests", ["api_call_limit_exceeded", "too_many_requests"]),
      headers: {
        "Retry-After": { description: "Seconds to wait", schema: { type: "integer" } },
      },
    },
    "500": {
      description: "Unexpected failure, with the request's id",
      ...json(ref("InternalError")),
    },
    "503": failure("A service behind the gateway cannot be reached", ["service_unavailable"]),
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

/** A record's id: ids stay below 2^53 (SPEC section 1). */
const ROW_ID: JsonObject = {
  type: "integer",
  format: "int64",
  minimum: 1,
  maximum: Number.MAX_SAFE_INTEGER,
};

const ROW_ID_PARAMETER = (location: "path" | "query"): JsonObject => ({
  name: "row_id",
  in: location,
  required: true,
  schema: ROW_ID,
});

function readParameters(fields: readonly SchemaField[]): JsonObject[] {
  const names = fields.map((f) => f.name);
  return [
    {
      name: "response_format",
      in: "query",
      description: "Keys of `data`: field ids (`ids`) or field names (`names`).",
      schema: { type: "string", enum: ["ids", "names"], default: "ids" },
    },
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

function listParameters(fields: readonly SchemaField[]): JsonObject[] {
  const sortable = fields.filter((f) => f.type !== "json" && f.type !== "file").map((f) => f.name);
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
        `Operators: ${OPERATORS.join(", ")}. Dates also take today, yesterday, tomorrow, daysAgo:N, daysFromNow:N (UTC).`,
        `At most ${WHERE_MAX_LENGTH} characters, depth 10, 50 conditions.`,
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
    ...readParameters(fields),
  ];
}

/** A value schema with the field's own words before what its type says about the value. */
function described(schema: JsonObject, own: string): JsonObject {
  const type = typeof schema.description === "string" ? schema.description : "";
  if (!own) return schema;
  if (!type) return { ...schema, description: own };
  return { ...schema, description: `${/[.!?:]$/.test(own) ? own : `${own}.`} ${type}` };
}

/** The value schemas of the table's fields, keyed as `keyOf` says. */
function dataSchema(
  fields: readonly SchemaField[],
  keyOf: (field: SchemaField) => string,
  description: string,
): JsonObject {
  const properties: JsonObject = {};
  for (const field of fields) {
    put(properties, keyOf(field), {
      title: field.name,
      ...described(jsonSchemaOf(field, "output"), field.description),
    });
  }
  // No `required`: with `fields=` an answer holds only the fields asked for.
  return { type: "object", description, properties, additionalProperties: false };
}

/**
 * A required field's value schema: no null, and none of the values `isEmptyValue` counts as
 * empty, which a create must not send and an update must not clear to.
 */
function filled(schema: JsonObject): JsonObject {
  const { type, enum: values, anyOf, ...rest } = schema;
  return {
    ...rest,
    ...(Array.isArray(type) ? { type: type.filter((t) => t !== "null") } : type ? { type } : {}),
    ...(Array.isArray(values) ? { enum: values.filter((v) => v !== null) } : {}),
    ...(Array.isArray(anyOf)
      ? { anyOf: anyOf.filter((s) => (s as JsonObject | null)?.type !== "null") }
      : {}),
    not: { enum: [null, "", []] },
  };
}

/** A reference of digits only is always an id (SPEC section 8): such a name cannot be used. */
const nameIsUsable = (field: SchemaField) => !/^[0-9]+$/.test(field.name);

/**
 * The values a create (or update) may send, keyed by name or by id. The route also takes the
 * two mixed, and names in any case, which no schema of fixed keys says.
 */
function inputSchema(
  fields: readonly SchemaField[],
  create: boolean,
  by: "name" | "id",
): JsonObject {
  const writable = fields.filter(
    (f) => !isReadOnlyType(f.type) && (by === "id" || nameIsUsable(f)),
  );
  const keyOf = (field: SchemaField) => (by === "id" ? field.id : field.name);
  const properties: JsonObject = {};
  for (const field of writable) {
    const value = jsonSchemaOf(field, "input");
    put(properties, keyOf(field), {
      ...(by === "id" ? { title: field.name } : {}),
      ...described(
        field.required ? filled(value) : value,
        `Field ${field.id}${field.required ? " (required)" : ""}${field.description ? `: ${field.description}` : ""}`,
      ),
    });
  }
  // A required field named with digits only cannot be named: no body keyed by names has it.
  const required = create
    ? fields.filter((f) => !isReadOnlyType(f.type) && f.required).map(keyOf)
    : [];
  const digitNames = fields.filter((f) => !nameIsUsable(f)).map((f) => f.name);
  return {
    type: "object",
    description: `${
      by === "id"
        ? "Values keyed by field id (all digits)."
        : `Values keyed by field name (any case)${digitNames.length > 0 ? `; a name of digits only reads as an id, so ${digitNames.join(", ")} are written by id` : ""}.`
    } ${create ? "Required fields must be present and non-empty." : "Only the named fields change; required fields cannot be cleared."} Read-only fields (${
      fields
        .filter((f) => isReadOnlyType(f.type))
        .map((f) => f.name)
        .join(", ") || "none"
    }) cannot be written. A record's values come to at most ${mebibytes(RECORD_MAX_BYTES)} as stored JSON (400 on \`data\` past it).`,
    properties,
    ...(required.length > 0 ? { required } : {}),
    additionalProperties: false,
  };
}

function components(schema: TableSchema): JsonObject {
  const record = (data: string): JsonObject => ({
    type: "object",
    required: ["row_id", "table_id", "created_at", "updated_at", "data"],
    properties: {
      row_id: { type: "integer", format: "int64" },
      table_id: { type: "integer", format: "int64" },
      created_at: { type: "string", format: "date-time" },
      updated_at: { type: "string", format: "date-time" },
      data: ref(data),
    },
  });
  return {
    securitySchemes: {
      bearer: {
        type: "http",
        scheme: "bearer",
        description: "An API token (`rb_...`) of the table's organization, or a member's session.",
      },
    },
    schemas: {
      Record: record("RecordData"),
      RecordByName: record("RecordDataByName"),
      RecordData: dataSchema(
        schema.fields,
        (f) => f.id,
        "With response_format=ids: every field by id (those of `fields` when given), null when empty.",
      ),
      RecordDataByName: dataSchema(
        schema.fields,
        (f) => f.name,
        "With response_format=names: every field by name (those of `fields` when given), null when empty.",
      ),
      RecordCreateData: inputSchema(schema.fields, true, "name"),
      RecordCreateDataById: inputSchema(schema.fields, true, "id"),
      RecordUpdateData: inputSchema(schema.fields, false, "name"),
      RecordUpdateDataById: inputSchema(schema.fields, false, "id"),
      ValidationError: {
        type: "object",
        required: ["status_code", "detail", "extra"],
        properties: {
          status_code: { const: 400 },
          detail: { type: "string" },
          extra: {
            type: "array",
            items: {
              type: "object",
              required: ["key", "message", "source"],
              properties: {
                key: { type: "string" },
                message: { type: "string" },
                source: { enum: ["body", "query", "path", "header"] },
              },
            },
          },
        },
      },
      InternalError: {
        type: "object",
        required: ["message", "data"],
        properties: {
          message: { const: "internal_error" },
          data: {
            type: "object",
            required: ["request_id"],
            properties: { request_id: { type: "string" } },
          },
        },
      },
    },
  };
}

/** A write's `data`: keyed by names or by ids. */
const CREATE_DATA: JsonObject = {
  anyOf: [ref("RecordCreateData"), ref("RecordCreateDataById")],
};
const UPDATE_DATA: JsonObject = {
  anyOf: [ref("RecordUpdateData"), ref("RecordUpdateDataById")],
};

/** anyOf: a record can fit both, as one with no fields in `data` does. */
const RECORD_OUT: JsonObject = {
  anyOf: [ref("Record"), ref("RecordByName")],
  description: "Keyed as response_format says.",
};

/**
 * An OpenAPI 3.1 document of one table's record routes, both families of SPEC sections 8.1 and
 * 8.2, with the table's real field names and value schemas (the registry's `jsonSchemaOf`),
 * read-only fields marked, and the list parameters of section 8.3.
 */
export function tableOpenApi(schema: TableSchema, baseUrl: string): JsonObject {
  const { fields } = schema;
  const v1 = `/public/v1/databases/{database_id}/tables/{table_id}`;
  const pathIds = [
    integerParameter("database_id", "path", schema.databaseId, "This table's database."),
    integerParameter("table_id", "path", schema.tableId, "This table."),
  ];
  const queryTable = integerParameter("table_id", "query", schema.tableId, "This table.");
  const queryDatabase = (required: boolean): JsonObject => ({
    ...integerParameter("database_id", "query", schema.databaseId, "This table's database."),
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
      properties: { [key]: CREATE_DATA },
    }),
  });
  const updateBody: JsonObject = {
    required: true,
    ...json({
      type: "object",
      required: ["data"],
      additionalProperties: false,
      properties: { data: UPDATE_DATA },
    }),
  };
  const recordResponse = (description: string, access: Access) =>
    withErrors(
      {
        "200": success(description, {
          type: "object",
          required: ["record"],
          properties: { record: RECORD_OUT },
        }),
      },
      access,
    );
  const listResponse = withErrors(
    {
      "200": success("A page of records", {
        type: "object",
        required: ["records", "total", "has_more", "limit", "offset"],
        properties: {
          records: { type: "array", items: RECORD_OUT },
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
      }),
    },
    "list",
  );
  const deleteResponse = withErrors(
    {
      "200": success("Deleted", {
        type: "object",
        required: ["deleted_id"],
        properties: { deleted_id: { type: "integer", format: "int64" } },
      }),
    },
    "change",
  );
  const recordsResponse = (description: string, access: Access) =>
    withErrors(
      {
        "200": success(description, {
          type: "object",
          required: ["records"],
          properties: { records: { type: "array", items: ref("Record") } },
        }),
      },
      access,
    );

  return {
    openapi: "3.1.0",
    info: {
      title: `Rowbase table ${schema.name}`,
      version: "1.0.0",
      description: `The record routes of table ${schema.tableId} (database ${schema.databaseId}) with its fields: ${fields.map((f) => `${f.name} (${f.type}, id ${f.id})`).join(", ")}. A method not listed for a path answers 405 \`method_not_allowed\`: PUT does not replace records, PATCH changes them.`,
    },
    ...(baseUrl ? { servers: [{ url: baseUrl }] } : {}),
    security,
    paths: {
      [`${v1}/records`]: {
        parameters: pathIds,
        get: op({
          operationId: "listRecords",
          summary: "List records",
          parameters: listParameters(fields),
          responses: listResponse,
        }),
        post: op({
          operationId: "createRecord",
          summary: "Create a record",
          requestBody: createBody("data"),
          responses: recordResponse("The created record, keyed by field id", "create"),
        }),
      },
      [`${v1}/records/{row_id}`]: {
        parameters: [...pathIds, ROW_ID_PARAMETER("path")],
        get: op({
          operationId: "getRecord",
          summary: "Get a record",
          parameters: readParameters(fields),
          responses: recordResponse("The record", "get"),
        }),
        patch: op({
          operationId: "updateRecord",
          summary: "Change the named fields of a record",
          requestBody: updateBody,
          responses: recordResponse("The updated record, keyed by field id", "change"),
        }),
        delete: op({
          operationId: "deleteRecord",
          summary: "Delete a record",
          responses: deleteResponse,
        }),
      },
      [`${v1}/records/batch`]: {
        parameters: pathIds,
        post: op({
          operationId: "batchCreateRecords",
          summary: `Create 1-${RECORD_BATCH_MAX} records, all or none`,
          requestBody: {
            required: true,
            ...json({
              type: "object",
              required: ["records"],
              additionalProperties: false,
              properties: {
                records: {
                  type: "array",
                  minItems: 1,
                  maxItems: RECORD_BATCH_MAX,
                  items: {
                    type: "object",
                    required: ["data"],
                    additionalProperties: false,
                    properties: { data: CREATE_DATA },
                  },
                },
              },
            }),
          },
          responses: recordsResponse("The created records in request order", "create"),
        }),
        patch: op({
          operationId: "batchUpdateRecords",
          summary: `Change 1-${RECORD_BATCH_MAX} records, all or none`,
          requestBody: {
            required: true,
            ...json({
              type: "object",
              required: ["records"],
              additionalProperties: false,
              properties: {
                records: {
                  type: "array",
                  minItems: 1,
                  maxItems: RECORD_BATCH_MAX,
                  items: {
                    type: "object",
                    required: ["row_id", "data"],
                    additionalProperties: false,
                    properties: {
                      row_id: ROW_ID,
                      data: UPDATE_DATA,
                    },
                  },
                },
              },
            }),
          },
          responses: recordsResponse("The updated records in request order", "change"),
        }),
      },
      [`${v1}/records/batch_delete`]: {
        parameters: pathIds,
        post: op({
          operationId: "batchDeleteRecords",
          summary: `Delete 1-${RECORD_BATCH_MAX} records, all or none (an unknown id deletes nothing: 404)`,
          requestBody: {
            required: true,
            ...json({
              type: "object",
              required: ["row_ids"],
              additionalProperties: false,
              properties: {
                row_ids: {
                  type: "array",
                  minItems: 1,
                  maxItems: RECORD_BATCH_MAX,
                  items: ROW_ID,
                },
              },
            }),
          },
          responses: withErrors(
            {
              "200": success("Deleted", {
                type: "object",
                required: ["deleted_ids"],
                properties: {
                  deleted_ids: { type: "array", items: { type: "integer", format: "int64" } },
                },
              }),
            },
            "change",
          ),
        }),
      },
      [`${v1}/openapi.json`]: {
        parameters: pathIds,
        get: op({
          operationId: "getTableOpenApi",
          summary: "This document",
          responses: withErrors(
            {
              "200": {
                description: "An OpenAPI 3.1 document, without an envelope",
                ...json({
                  type: "object",
                  required: ["openapi", "info", "paths"],
                  properties: { openapi: { type: "string", pattern: "^3\\.1\\." } },
                }),
              },
            },
            "list",
          ),
        }),
      },
      "/public/record/create": {
        post: op({
          operationId: "publicCreateRecord",
          summary: "Create a record (query form)",
          parameters: [queryTable],
          requestBody: createBody("data"),
          responses: recordResponse("The created record, keyed by field id", "create"),
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
            ...readParameters(fields),
          ],
          responses: recordResponse("The record", "get"),
        }),
      },
      "/public/record/list": {
        get: op({
          operationId: "publicListRecords",
          summary: "List records (query form)",
          parameters: [queryDatabase(true), queryTable, ...listParameters(fields)],
          responses: listResponse,
        }),
      },
      "/public/record/update": {
        put: op({
          operationId: "publicUpdateRecord",
          summary: "Change the named fields of a record (query form)",
          parameters: [queryTable, ROW_ID_PARAMETER("query")],
          requestBody: updateBody,
          responses: recordResponse("The updated record, keyed by field id", "change"),
        }),
      },
      "/public/record/delete": {
        post: op({
          operationId: "publicDeleteRecord",
          summary: "Delete a record (query form)",
          parameters: [queryTable, ROW_ID_PARAMETER("query")],
          responses: deleteResponse,
        }),
        delete: op({
          operationId: "publicDeleteRecordByDelete",
          summary: "Delete a record (query form)",
          parameters: [queryTable, ROW_ID_PARAMETER("query")],
          responses: deleteResponse,
        }),
      },
    },
    components: components(schema),
  };
}
