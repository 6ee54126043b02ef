import type { JsonObject } from "@bufbuild/protobuf";
import type { CallOptions, Client } from "@connectrpc/connect";
import { recordJson } from "@rowbase/kit";
import type { TableRecordSchema } from "@rowbase/proto/rowbase/records/v1/records_pb";
import type { RecordsService } from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import type { z } from "zod";
import type { ApiTokenCaller, SessionCaller } from "../../auth/authenticate.js";
import type { GatewayContext } from "../../gateway-context.js";
import { countOf, idOf, required } from "../../presentation/wire-values.js";
import type { ApiCallQuota } from "../../quota/api-call-quota.js";
import { JsonText } from "../../routing/route.js";
import {
  countValue,
  recordsJson,
  responseFormatValue,
  richTextValue,
} from "./record-presenters.js";
import type {
  CountModeName,
  PublicBatchDeleteSchema,
  PublicBatchRecordsSchema,
  PublicDeleteSchema,
  PublicListSchema,
  PublicRecordSchema,
  ResponseFormatName,
  RichTextFormatName,
} from "./record-schemas.js";

/**
 * The table a record call names. `databaseId` is set by the v1 routes (the path has it) and by
 * the query-form routes that take one; the records service then checks the table is in it.
 */
export interface TableTarget {
  tableId: bigint;
  databaseId?: bigint | undefined;
}

/** How the records of a read come out. */
export interface ReadOptions {
  response_format: ResponseFormatName;
  rich_text?: RichTextFormatName | undefined;
  /** The `fields` parameter as written; empty: every field. */
  fields: string;
}

export interface ListOptions extends ReadOptions {
  limit: number;
  offset: number;
  count: CountModeName;
  /** Empty: every record. */
  where: string;
  /** The `sort` parameter as written; empty: `row_id` ascending. */
  sort: string;
}

/** The request a record call is made for. */
export interface RecordCall {
  caller: SessionCaller | ApiTokenCaller;
  /** The gRPC options of the request: its id and the caller's signed principal. */
  call: CallOptions;
  ctx: GatewayContext;
}

export interface RecordOperationsDeps {
  records: Client<typeof RecordsService>;
  quota: ApiCallQuota;
}

type Data<S extends z.ZodType> = z.output<S>;
/** A route's `data` as JSON text (records pass through as the records service wrote them). */
type DataText<S extends z.ZodType> = JsonText<z.output<S>>;

/** `{"record": ...}`, the answer of the single-record routes. */
const oneRecord = (record: Parameters<typeof recordJson>[0]): DataText<typeof PublicRecordSchema> =>
  new JsonText(`{"record":${recordJson(record)}}`);

/**
 * The one implementation behind both route families of a table's records: the v1 routes and the
 * query-form routes read their parameters from different places and call these. Every call is
 * charged to the monthly API-call quota (429 `api_call_limit_exceeded` past it), a write before
 * it is made and a read while it is made (`chargedRead`), and made to the records service,
 * which authorizes it (404 across organizations, 403 `token_read_only` and
 * `organization_forbidden` on writes) and validates the values and the query.
 */
export class RecordOperations {
  constructor(private readonly deps: RecordOperationsDeps) {}

  async list(
    target: TableTarget,
    options: ListOptions,
    request: RecordCall,
  ): Promise<DataText<typeof PublicListSchema>> {
    const response = await this.chargedRead(target, request, (call) =>
      this.deps.records.listRecords(
        {
          ...tableOf(target),
          limit: options.limit,
          offset: options.offset,
          count: countValue(options.count),
          where: options.where,
          sortList: options.sort,
          fieldList: options.fields,
          responseFormat: responseFormatValue(options.response_format),
          richText: richTextValue(options.rich_text),
        },
        call,
      ),
    );
    const total = response.total === undefined ? "null" : countOf(response.total);
    const estimated = response.totalEstimated ? `"total_estimated":true,` : "";
    const page = `"total":${total},${estimated}"has_more":${response.hasMore},"limit":${response.limit},"offset":${response.offset}`;
    return new JsonText(`{"records":${recordsJson(response.records)},${page}}`);
  }

  async get(
    target: TableTarget,
    rowId: bigint,
    options: ReadOptions,
    request: RecordCall,
  ): Promise<DataText<typeof PublicRecordSchema>> {
    const response = await this.chargedRead(target, request, (call) =>
      this.deps.records.getRecord(
        {
          ...tableOf(target),
          rowId,
          fieldList: options.fields,
          responseFormat: responseFormatValue(options.response_format),
          richText: richTextValue(options.rich_text),
        },
        call,
      ),
    );
    return oneRecord(response.record);
  }

  async create(
    target: TableTarget,
    data: JsonObject,
    request: RecordCall,
  ): Promise<DataText<typeof PublicRecordSchema>> {
    await this.charge(target, request);
    const response = await this.deps.records.createRecord(
      { ...tableOf(target), dataJson: JSON.stringify(data) },
      request.call,
    );
    return oneRecord(response.record);
  }

  async update(
    target: TableTarget,
    rowId: bigint,
    data: JsonObject,
    request: RecordCall,
  ): Promise<DataText<typeof PublicRecordSchema>> {
    await this.charge(target, request);
    const response = await this.deps.records.updateRecord(
      { ...tableOf(target), rowId, dataJson: JSON.stringify(data) },
      request.call,
    );
    return oneRecord(response.record);
  }

  async delete(
    target: TableTarget,
    rowId: bigint,
    request: RecordCall,
  ): Promise<Data<typeof PublicDeleteSchema>> {
    await this.charge(target, request);
    const response = await this.deps.records.deleteRecord(
      { ...tableOf(target), rowId },
      request.call,
    );
    return { deleted_id: idOf(response.deletedId) };
  }

  async batchCreate(
    target: TableTarget,
    drafts: { data: JsonObject }[],
    request: RecordCall,
  ): Promise<DataText<typeof PublicBatchRecordsSchema>> {
    await this.charge(target, request);
    const response = await this.deps.records.batchCreateRecords(
      {
        ...tableOf(target),
        records: drafts.map(({ data }) => ({ dataJson: JSON.stringify(data) })),
      },
      request.call,
    );
    return new JsonText(`{"records":${recordsJson(response.records)}}`);
  }

  async batchUpdate(
    target: TableTarget,
    patches: { row_id: bigint; data: JsonObject }[],
    request: RecordCall,
  ): Promise<DataText<typeof PublicBatchRecordsSchema>> {
    await this.charge(target, request);
    const response = await this.deps.records.batchUpdateRecords(
      {
        ...tableOf(target),
        records: patches.map(({ row_id: rowId, data }) => ({
          rowId,
          dataJson: JSON.stringify(data),
        })),
      },
      request.call,
    );
    return new JsonText(`{"records":${recordsJson(response.records)}}`);
  }

  async batchDelete(
    target: TableTarget,
    rowIds: bigint[],
    request: RecordCall,
  ): Promise<Data<typeof PublicBatchDeleteSchema>> {
    await this.charge(target, request);
    const response = await this.deps.records.batchDeleteRecords(
      { ...tableOf(target), rowIds },
      request.call,
    );
    return { deleted_ids: response.deletedIds.map((rowId) => idOf(rowId)) };
  }

  /** What the table's records hold, for its OpenAPI document. */
  async recordSchema(target: TableTarget, request: RecordCall): Promise<TableRecordSchema> {
    const response = await this.chargedRead(target, request, (call) =>
      this.deps.records.getRecordSchema(tableOf(target), call),
    );
    return required(response.schema, "schema");
  }

  /**
   * A read, made while the call is charged rather than after: the records service answers in
   * the time the quota's round trips to Redis take (get by id: about 1,070 -> 1,250 requests
   * a second in the benchmark). Nothing is returned before the call is counted; a refused
   * charge (429 past the allowance, 404 for a session outside the table's organization) is the
   * answer whatever the read found, and the read's answer is dropped. Such a read still costs
   * the records service a lookup, which the rate limits bound as they bound any call. Writes
   * are charged first: a refused write must not be made.
   */
  private async chargedRead<T>(
    target: TableTarget,
    request: RecordCall,
    read: (call: CallOptions) => Promise<T>,
  ): Promise<T> {
    const reading = read(request.call);
    // Settled below, or abandoned when the charge is refused.
    reading.catch(() => {});
    await this.charge(target, request);
    return reading;
  }

  private async charge(target: TableTarget, { caller, ctx }: RecordCall): Promise<void> {
    await this.deps.quota.charge(caller, target.tableId, ctx.state.requestId);
  }
}

/** The table fields every request shares; no database is 0, which the contract reads as none. */
function tableOf(target: TableTarget): { tableId: bigint; databaseId: bigint } {
  return { tableId: target.tableId, databaseId: target.databaseId ?? 0n };
}
