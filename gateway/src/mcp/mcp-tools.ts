import type { Client } from "@connectrpc/connect";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult, ToolAnnotations } from "@modelcontextprotocol/sdk/types.js";
import type { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import type { RecordsService } from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import { z } from "zod";
import type { ApiTokenCaller } from "../auth/authenticate.js";
import { httpErrorOf } from "../errors/error-table.js";
import { itemsFromIssues, ValidationFailed } from "../errors/validation-failed.js";
import { countOf } from "../presentation/wire-values.js";
import type { ApiCallQuota } from "../quota/api-call-quota.js";
import { changePages, changesPageJson } from "../routes/change/change-routes.js";
import { ChangesPageSchema, ChangesQuery } from "../routes/change/change-schemas.js";
import { presentDatabase } from "../routes/database/database-presenters.js";
import { DatabaseListSchema } from "../routes/database/database-schemas.js";
import { presentField } from "../routes/field/field-presenters.js";
import type { RecordCall, RecordOperations } from "../routes/record/record-operations.js";
import { countValue } from "../routes/record/record-presenters.js";
import {
  PublicBatchCreateBody,
  PublicBatchDeleteBody,
  PublicBatchDeleteSchema,
  PublicBatchRecordsSchema,
  PublicBatchUpdateBody,
  PublicGetQuery,
  PublicGetSchema,
  PublicListQuery,
  PublicListSchema,
  PublicTableQuery,
  responseFormatParameter,
} from "../routes/record/record-schemas.js";
import { presentTable } from "../routes/table/table-presenters.js";
import {
  TableDatabaseQuery,
  TableGetSchema,
  TableIdQuery,
  TableSchema,
} from "../routes/table/table-schemas.js";
import { JsonText } from "../routing/route.js";
import { tableGuide } from "./table-guide.js";

/** The records one write tool takes at most: a model's call stays small enough to read back. */
export const MCP_BATCH_MAX = 100;

export interface McpToolDeps {
  catalog: Client<typeof CatalogService>;
  records: Client<typeof RecordsService>;
  /** The record routes' one implementation: charged, authorized and validated as they are. */
  operations: RecordOperations;
  quota: ApiCallQuota;
  /** The gateway's version, which `initialize` reports. */
  version: string;
}

/** The request a tool call is made for: an API token's, with its gRPC options. */
export interface McpRequest extends RecordCall {
  caller: ApiTokenCaller;
}

/** Names records by name unless told otherwise, as a model reads them best. */
const namesFirst = { response_format: responseFormatParameter("names") };

const batchMessage = `must have 1-${MCP_BATCH_MAX} items`;

/**
 * The arguments of each tool: the REST route's own schemas (the same rules and the same 400
 * messages), with the table named beside them as the query-form routes name it.
 */
const ARGS = {
  list_databases: z.strictObject({}),
  list_tables: TableDatabaseQuery.partial(),
  describe_table: TableIdQuery,
  list_records: PublicListQuery.omit({ database_id: true }).extend(namesFirst),
  get_record: PublicGetQuery.extend(namesFirst),
  list_changes: ChangesQuery.extend({ ...PublicTableQuery.shape, ...namesFirst }),
  create_records: PublicTableQuery.extend({
    records: PublicBatchCreateBody.shape.records.max(MCP_BATCH_MAX, batchMessage),
  }),
  update_records: PublicTableQuery.extend({
    records: PublicBatchUpdateBody.shape.records.max(MCP_BATCH_MAX, batchMessage),
  }),
  delete_records: PublicTableQuery.extend({
    row_ids: PublicBatchDeleteBody.shape.row_ids.max(MCP_BATCH_MAX, batchMessage),
  }),
} as const;

type ToolName = keyof typeof ARGS;

const TableWithCount = TableSchema.extend({
  record_count: z
    .number()
    .int()
    .min(0)
    .describe("The table's records: exact up to 1,000, PostgreSQL's estimate above"),
  record_count_estimated: z.boolean().describe("Whether `record_count` is an estimate"),
});

const TableGuideSchema = TableGetSchema.extend({
  guide: z.string().describe("How to write `where`, `sort` and `fields` for this table"),
  examples: z.object({
    where: z.array(z.string()).describe("Filters on this table's fields"),
    sort: z.string(),
    fields: z.string(),
  }),
});

const READ: ToolAnnotations = { readOnlyHint: true, openWorldHint: false };

interface ToolSpec {
  title: string;
  description: string;
  write: boolean;
  annotations: ToolAnnotations;
  output: z.ZodObject;
}

const TOOLS: Record<ToolName, ToolSpec> = {
  list_databases: {
    title: "List databases",
    description:
      "The databases of the API token's organization: id, name, description. Start here, then " +
      "list_tables and describe_table before reading or writing records.",
    write: false,
    annotations: READ,
    output: DatabaseListSchema,
  },
  list_tables: {
    title: "List tables",
    description:
      "The tables of one database (`database_id`), or of every database of the organization " +
      "when it is left out, each with its number of records.",
    write: false,
    annotations: READ,
    output: z.object({ tables: z.array(TableWithCount) }),
  },
  describe_table: {
    title: "Describe a table",
    description:
      "A table's fields (id, name, type, options such as the choices of a select, required, " +
      "description) and a guide to the `where`, `sort` and `fields` arguments of list_records " +
      "with examples written with this table's own fields and choices. Call it before " +
      "filtering or writing: values must fit the field types, and select values must be " +
      "among the choices.",
    write: false,
    annotations: READ,
    output: TableGuideSchema,
  },
  list_records: {
    title: "List records",
    description:
      "A page of a table's records, filtered (`where`), sorted (`sort`) and narrowed to some " +
      "fields (`fields`); `data` is keyed by field names unless `response_format` is `ids`. " +
      "`total` counts every match and `has_more` says whether another page follows (raise " +
      "`offset` by `limit`). A filter that does not parse answers an error naming the position " +
      "of the problem: fix it and call again. describe_table shows the syntax with examples.",
    write: false,
    annotations: READ,
    output: PublicListSchema,
  },
  get_record: {
    title: "Get a record",
    description: "One record of a table by its `row_id`; `data` is keyed by field names.",
    write: false,
    annotations: READ,
    output: PublicGetSchema,
  },
  list_changes: {
    title: "List record changes",
    description:
      "The table's record changes (created, updated, deleted) after a cursor, oldest first: " +
      "pass a page's `next` as `after` to read on; `after: now` gives no changes and the " +
      "cursor of the present, to see later only what changes from now on.",
    write: false,
    annotations: READ,
    output: ChangesPageSchema,
  },
  create_records: {
    title: "Create records",
    description:
      `Creates 1-${MCP_BATCH_MAX} records in a table, all or none: if any value is refused ` +
      "nothing is written, and the error names each bad key (`records.N.data.<field>`). " +
      "`data` is keyed by field name or id; fields left out take their default. The answer " +
      "holds the records created, keyed by field ids.",
    write: true,
    annotations: {
      readOnlyHint: false,
      destructiveHint: false,
      idempotentHint: false,
      openWorldHint: false,
    },
    output: PublicBatchRecordsSchema,
  },
  update_records: {
    title: "Update records",
    description:
      `Changes 1-${MCP_BATCH_MAX} records, all or none: only the fields named in each \`data\` ` +
      "change, `null` empties a field. Values replaced are gone (the audit log keeps them). " +
      "Sending the same changes again changes nothing more.",
    write: true,
    annotations: {
      readOnlyHint: false,
      destructiveHint: true,
      idempotentHint: true,
      openWorldHint: false,
    },
    output: PublicBatchRecordsSchema,
  },
  delete_records: {
    title: "Delete records",
    description: `Deletes 1-${MCP_BATCH_MAX} records by \`row_id\`, all or none.`,
    write: true,
    annotations: {
      readOnlyHint: false,
      destructiveHint: true,
      idempotentHint: false,
      openWorldHint: false,
    },
    output: PublicBatchDeleteSchema,
  },
};

/** Each tool with its description and whether it writes, for the endpoint's documentation. */
export function toolSummaries(): { name: string; title: string; write: boolean }[] {
  return (Object.keys(TOOLS) as ToolName[]).map((name) => ({
    name,
    title: TOOLS[name].title,
    write: TOOLS[name].write,
  }));
}

/** The tools an access level is offered: a read token never sees the write tools. */
export function toolNames(access: ApiTokenCaller["access"]): ToolName[] {
  return (Object.keys(TOOLS) as ToolName[]).filter(
    (name) => access === "read_write" || !TOOLS[name].write,
  );
}

/**
 * The JSON Schema a client is shown for a tool's arguments: the REST schemas', written as the
 * client sends them. The SDK itself takes any object; the REST schemas judge it in the tool, so
 * that a bad argument answers the REST route's 400 message as an error result.
 */
function advertised(schema: z.ZodType): z.ZodObject {
  const { $schema: _, ...json } = z.toJSONSchema(schema, {
    io: "input",
    target: "draft-7",
    unrepresentable: "any",
  });
  return z.looseObject({}).meta(json);
}

/** Each tool's advertised arguments, converted once. */
const ADVERTISED = Object.fromEntries(
  (Object.keys(ARGS) as ToolName[]).map((name) => [name, advertised(ARGS[name])]),
) as Record<ToolName, z.ZodObject>;

/**
 * A server for one request of one API token (the endpoint is stateless): the tools of its
 * access, each bound to the token's organization by the services' own checks.
 */
export function mcpServer(deps: McpToolDeps, request: McpRequest): McpServer {
  const server = new McpServer(
    { name: "rowbase", version: deps.version },
    {
      instructions:
        "Rowbase tables of one organization. list_databases, list_tables and describe_table " +
        "show what there is; list_records filters with a small query language that " +
        "describe_table explains with the table's own fields.",
    },
  );
  const handlers = toolHandlers(deps, request);
  for (const name of toolNames(request.caller.access)) {
    const spec = TOOLS[name];
    server.registerTool(
      name,
      {
        title: spec.title,
        description: spec.description,
        inputSchema: ADVERTISED[name],
        outputSchema: spec.output,
        annotations: { title: spec.title, ...spec.annotations },
      },
      (args: Record<string, unknown>) => answer(request, () => handlers[name](args)),
    );
  }
  return server;
}

/** Parses a tool's arguments with its REST schemas, or the 400 the route would answer. */
function argsOf<N extends ToolName>(name: N, args: unknown): z.output<(typeof ARGS)[N]> {
  const result = ARGS[name].safeParse(args ?? {}, { reportInput: true });
  if (!result.success) throw new ValidationFailed(itemsFromIssues(result.error.issues, "body"));
  return result.data as z.output<(typeof ARGS)[N]>;
}

function toolHandlers(
  deps: McpToolDeps,
  request: McpRequest,
): Record<ToolName, (args: unknown) => Promise<unknown>> {
  const { caller, call, ctx } = request;
  const requestId = ctx.state.requestId;
  const organizationId = caller.organizationId;
  const chargeOrganization = () =>
    deps.quota.chargeOrganization(caller, organizationId, "organization_not_found", requestId);
  return {
    async list_databases(args) {
      argsOf("list_databases", args);
      await chargeOrganization();
      const { databases } = await deps.catalog.listDatabases({ organizationId }, call);
      return { databases: databases.map((database) => presentDatabase(database)) };
    },
    async list_tables(args) {
      const { database_id } = argsOf("list_tables", args);
      await chargeOrganization();
      const databaseIds =
        database_id !== undefined
          ? [database_id]
          : (await deps.catalog.listDatabases({ organizationId }, call)).databases.map(
              (database) => database.databaseId,
            );
      const tables = [];
      for (const databaseId of databaseIds) {
        const listed = await deps.catalog.listTables({ databaseId }, call);
        for (const table of listed.tables) {
          // The count a list with count=estimated gives: exact up to 1,000 records.
          const page = await deps.records.listRecords(
            { tableId: table.tableId, databaseId, limit: 1, count: countValue("estimated") },
            call,
          );
          tables.push({
            ...presentTable(table),
            record_count: page.total === undefined ? 0 : countOf(page.total),
            record_count_estimated: page.totalEstimated,
          });
        }
      }
      return { tables };
    },
    async describe_table(args) {
      const { table_id } = argsOf("describe_table", args);
      await deps.quota.charge(caller, table_id, requestId);
      const response = await deps.catalog.getTable({ tableId: table_id }, call);
      const fields = response.fields.map((field) => presentField(field));
      const guide = tableGuide(fields);
      return {
        table: presentTable(response.table),
        fields,
        guide: guide.text,
        examples: guide.examples,
      };
    },
    list_records(args) {
      const options = argsOf("list_records", args);
      return deps.operations.list({ tableId: options.table_id }, options, request);
    },
    get_record(args) {
      const options = argsOf("get_record", args);
      const table = { tableId: options.table_id, databaseId: options.database_id };
      return deps.operations.get(table, options.row_id, options, request);
    },
    async list_changes(args) {
      const options = argsOf("list_changes", args);
      const table = { tableId: options.table_id, databaseId: 0n };
      await deps.quota.charge(caller, table.tableId, requestId);
      const read = changePages(deps.records, table, options, "query");
      return changesPageJson(await read(options.after, call, options.limit));
    },
    create_records(args) {
      const { table_id, records } = argsOf("create_records", args);
      return deps.operations.batchCreate({ tableId: table_id }, records, request);
    },
    update_records(args) {
      const { table_id, records } = argsOf("update_records", args);
      return deps.operations.batchUpdate({ tableId: table_id }, records, request);
    },
    delete_records(args) {
      const { table_id, row_ids } = argsOf("delete_records", args);
      return deps.operations.batchDelete({ tableId: table_id }, row_ids, request);
    },
  };
}

/**
 * A tool's answer: the REST route's `data` as `structuredContent` and as JSON text. Whatever it
 * throws becomes an error result carrying what the REST route answers (the 400's items, the
 * domain error's code), never a JSON-RPC error: a model reads the result and corrects itself.
 * A fault of ours (the REST 500) is logged and answers `internal_error` with the request id.
 */
async function answer(request: McpRequest, work: () => Promise<unknown>): Promise<CallToolResult> {
  try {
    const data = await work();
    const text = data instanceof JsonText ? data.text : JSON.stringify(data);
    const structuredContent = (data instanceof JsonText ? JSON.parse(data.text) : data) as Record<
      string,
      unknown
    >;
    return { content: [{ type: "text", text }], structuredContent };
  } catch (error) {
    const { ctx } = request;
    const response = httpErrorOf(error, {
      method: "POST",
      path: ctx.path,
      requestId: ctx.state.requestId,
    });
    if (response.log === "error") ctx.state.log.error({ err: error }, "MCP tool call failed");
    else if (response.log === "warn") ctx.state.log.warn({ err: error }, "downstream unavailable");
    return {
      content: [{ type: "text", text: errorText(response.status, response.body) }],
      isError: true,
    };
  }
}

/** An error result's text: a line a model reads at once, then the REST answer as JSON. */
function errorText(status: number, body: ReturnType<typeof httpErrorOf>["body"]): string {
  const summary =
    "extra" in body
      ? `Invalid arguments: ${body.extra.map((item) => `${item.key}: ${item.message}`).join("; ")}`
      : `${body.message} (HTTP ${status})`;
  return `${summary}\n${JSON.stringify(body)}`;
}
