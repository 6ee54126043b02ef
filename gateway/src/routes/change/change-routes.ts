import type { CallOptions, Client } from "@connectrpc/connect";
import { changeJson, changeTypeValue, errorInfoOf, POLL_HEADER } from "@rowbase/kit";
import type { RecordsService } from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import type { z } from "zod";
import type { ApiTokenCaller, SessionCaller } from "../../auth/authenticate.js";
import { downstreamCallOptions } from "../../auth/downstream-call.js";
import { ValidationFailed } from "../../errors/validation-failed.js";
import type { GatewayContext } from "../../gateway-context.js";
import type { ApiCallQuota } from "../../quota/api-call-quota.js";
import type { RateLimitName } from "../../rate-limit/rate-limit-settings.js";
import { defineRoute, JsonText, type Route } from "../../routing/route.js";
import { responseFormatValue, richTextValue } from "../record/record-presenters.js";
import { V1_TABLE_PATH } from "../record/record-routes.js";
import { TablePath } from "../record/record-schemas.js";
import {
  type ChangeStreamQuery,
  ChangesPageSchema,
  ChangesQuery,
  ChangeStreamQuery as StreamQuery,
} from "./change-schemas.js";
import type { ChangeStreams } from "./change-streams.js";

export interface ChangeRoutesDeps {
  records: Client<typeof RecordsService>;
  quota: ApiCallQuota;
  streams: ChangeStreams;
  internalSecret: string;
}

const tags = ["Record changes"];
const rateLimits: RateLimitName[] = ["records_token", "records_user"];

const AUTH_DESCRIPTION =
  "Takes an API token (either access) or a member's session. Each call counts toward the " +
  "organization's monthly `api_calls_per_month`.";

type StreamOptions = z.output<typeof ChangeStreamQuery>;

/** The longest Last-Event-ID taken, as `after`. */
const LAST_EVENT_ID_MAX = 100;

/**
 * A table's changes after a cursor, as the records service's ListChanges answers them: the
 * page the feed route (and the MCP `list_changes` tool) answers, and each poll of a stream.
 */
export function changePages(
  records: Client<typeof RecordsService>,
  table: { tableId: bigint; databaseId: bigint },
  options: StreamOptions,
  afterSource: string,
) {
  return (after: string, call: CallOptions, limit = 0) =>
    records.listChanges(
      {
        ...table,
        after,
        afterSource,
        limit,
        types: options.types.map(changeTypeValue),
        where: options.where,
        fieldList: options.fields,
        responseFormat: responseFormatValue(options.response_format),
        richText: richTextValue(options.rich_text),
      },
      call,
    );
}

/** A page of changes as the feed answers it: `{changes, next, has_more}` as JSON text. */
export function changesPageJson(
  page: Awaited<ReturnType<ReturnType<typeof changePages>>>,
): JsonText<z.output<typeof ChangesPageSchema>> {
  return new JsonText(
    `{"changes":[${page.changes.map(changeJson).join(",")}],"next":${JSON.stringify(page.next)},"has_more":${page.hasMore}}`,
  );
}

/**
 * A table's change log through two routes: a page after a cursor (`/changes`), and the same as
 * Server-Sent Events that stay open (`/changes/stream`). Both read the records service's
 * ListChanges; the stream asks again every `pollMs` (docs/changes.md).
 */
export function changeRoutes(deps: ChangeRoutesDeps): Route[] {
  const pages = (
    table: { tableId: bigint; databaseId: bigint },
    options: StreamOptions,
    afterSource: string,
  ) => changePages(deps.records, table, options, afterSource);

  return [
    defineRoute({
      method: "GET",
      path: `${V1_TABLE_PATH}/changes`,
      operationId: "v1ChangeList",
      summary: "A page of the table's record changes after a cursor",
      description: `${AUTH_DESCRIPTION} Changes come oldest first, in the order they committed.`,
      tags,
      auth: "session_or_token",
      rateLimits,
      params: TablePath,
      query: ChangesQuery,
      response: ChangesPageSchema,
      errors: ["table_not_found", "api_call_limit_exceeded", "cursor_expired"],
      async handle({ params, query, caller, call, ctx }) {
        const table = { tableId: params.table_id, databaseId: params.database_id };
        await deps.quota.charge(caller, table.tableId, ctx.state.requestId);
        const page = await pages(table, query, "query")(query.after, call, query.limit);
        return changesPageJson(page);
      },
    }),
    defineRoute({
      method: "GET",
      path: `${V1_TABLE_PATH}/changes/stream`,
      operationId: "v1ChangeStream",
      summary: "The table's record changes as Server-Sent Events",
      description:
        `${AUTH_DESCRIPTION} Opening the stream counts once; the events sent on it do not. ` +
        "Answers `text/event-stream`: each change as `id: <change_id>`, `event: <type>`, " +
        "`data: <Change JSON>`; resumes after the `Last-Event-ID` header (or `after`); a comment " +
        'line every 15 s; `event: reset` with `data: {"next"}` when the cursor has expired. ' +
        "At most the plan's `change_streams` are open at once per organization (429 past it). " +
        "The stream ends when the gateway stops: reconnect with `Last-Event-ID`.",
      tags,
      auth: "session_or_token",
      rateLimits,
      params: TablePath,
      query: StreamQuery,
      eventStream: true,
      errors: ["table_not_found", "api_call_limit_exceeded", "too_many_requests"],
      async handle({ params, query, caller, call, ctx }) {
        const table = { tableId: params.table_id, databaseId: params.database_id };
        const header = lastEventId(ctx);
        const read = pages(table, query, header === undefined ? "query" : "header");
        const after = header ?? query.after;
        const organizationId = await deps.quota.charge(caller, table.tableId, ctx.state.requestId);
        const limits = await deps.quota.limits(organizationId, ctx.state.requestId);
        const release = await deps.streams.claim(organizationId, Number(limits.changeStreams));
        let first: Awaited<ReturnType<typeof read>> | "expired";
        try {
          first = await read(after, call).catch((error: unknown) => {
            if (errorInfoOf(error)?.reason === "cursor_expired") return "expired" as const;
            throw error;
          });
        } catch (error) {
          await release();
          throw error;
        }
        const closed = new Promise<void>((resolve) => ctx.res.once("close", () => resolve()));
        ctx.status = 200;
        ctx.set("content-type", "text/event-stream; charset=utf-8");
        ctx.set("cache-control", "no-store");
        // Proxies that buffer (nginx) must pass each event on at once.
        ctx.set("x-accel-buffering", "no");
        ctx.set("connection", "close");
        ctx.body = deps.streams.start({
          first,
          pages: (cursor, options) => read(cursor, options),
          call: () => callerOptions(deps.internalSecret, ctx, caller),
          release,
          closed,
          ctx,
        });
        return {};
      },
    }),
  ];
}

/** A stream's call options for each poll, marked as a poll (logged at debug by the service). */
async function callerOptions(
  secret: string,
  ctx: GatewayContext,
  caller: SessionCaller | ApiTokenCaller,
): Promise<CallOptions> {
  const options = await downstreamCallOptions(secret, ctx.state.requestId, caller);
  return {
    ...options,
    headers: { ...(options.headers as Record<string, string>), [POLL_HEADER]: "1" },
  };
}

/** The `Last-Event-ID` header, when sent; too long a one is a 400 on the header. */
function lastEventId(ctx: GatewayContext): string | undefined {
  const value = ctx.get("last-event-id");
  if (value === "") return undefined;
  if (value.length > LAST_EVENT_ID_MAX) {
    throw new ValidationFailed([
      {
        key: "Last-Event-ID",
        message: `must be at most ${LAST_EVENT_ID_MAX} characters`,
        source: "header",
        code: "too_long",
      },
    ]);
  }
  return value;
}
