import type { JsonObject } from "@bufbuild/protobuf";
import type { CallOptions, Client } from "@connectrpc/connect";
import type { Record as RecordMessage } from "@rowbase/proto/rowbase/records/v1/records_pb";
import type {
  ListRecordsResponse,
  RecordsService,
} from "@rowbase/proto/rowbase/records/v1/records_service_pb";

/** A record as the tests read it: its JSON text also parsed, as the gateway does. */
export type ShownRecord = RecordMessage & { data: JsonObject };

type Data = { data?: JsonObject | undefined };
type Table = { tableId?: bigint; databaseId?: bigint };

/**
 * The records client with values as objects: requests take `data` (sent as `data_json`, as the
 * gateway sends it) and every record answered has `data`, its `data_json` parsed. The wire is
 * unchanged; this only spares each test the JSON text.
 */
export interface JsonRecordsClient
  extends Omit<
    Client<typeof RecordsService>,
    | "createRecord"
    | "getRecord"
    | "listRecords"
    | "updateRecord"
    | "batchCreateRecords"
    | "batchUpdateRecords"
  > {
  createRecord(request: Table & Data, options?: CallOptions): Promise<{ record?: ShownRecord }>;
  getRecord(
    ...args: Parameters<Client<typeof RecordsService>["getRecord"]>
  ): Promise<{ record?: ShownRecord }>;
  listRecords(
    ...args: Parameters<Client<typeof RecordsService>["listRecords"]>
  ): Promise<Omit<ListRecordsResponse, "records"> & { records: ShownRecord[] }>;
  updateRecord(
    request: Table & Data & { rowId?: bigint },
    options?: CallOptions,
  ): Promise<{ record?: ShownRecord }>;
  batchCreateRecords(
    request: Table & { records?: Data[] },
    options?: CallOptions,
  ): Promise<{ records: ShownRecord[] }>;
  batchUpdateRecords(
    request: Table & { records?: (Data & { rowId: bigint })[] },
    options?: CallOptions,
  ): Promise<{ records: ShownRecord[] }>;
}

const jsonOf = (data: JsonObject | undefined) => (data === undefined ? "" : JSON.stringify(data));

function shown(record: RecordMessage): ShownRecord {
  return Object.assign(record, {
    data: (record.dataJson === "" ? {} : JSON.parse(record.dataJson)) as JsonObject,
  });
}

export function jsonRecordsClient(client: Client<typeof RecordsService>): JsonRecordsClient {
  return {
    ...client,
    async createRecord({ data, ...request }, options) {
      const { record } = await client.createRecord({ ...request, dataJson: jsonOf(data) }, options);
      return { record: record && shown(record) };
    },
    async getRecord(request, options) {
      const { record } = await client.getRecord(request, options);
      return { record: record && shown(record) };
    },
    async listRecords(request, options) {
      const response = await client.listRecords(request, options);
      return Object.assign(response, { records: response.records.map(shown) });
    },
    async updateRecord({ data, ...request }, options) {
      const { record } = await client.updateRecord({ ...request, dataJson: jsonOf(data) }, options);
      return { record: record && shown(record) };
    },
    async batchCreateRecords({ records, ...request }, options) {
      const response = await client.batchCreateRecords(
        { ...request, records: records?.map(({ data }) => ({ dataJson: jsonOf(data) })) },
        options,
      );
      return { records: response.records.map(shown) };
    },
    async batchUpdateRecords({ records, ...request }, options) {
      const response = await client.batchUpdateRecords(
        {
          ...request,
          records: records?.map(({ data, rowId }) => ({ rowId, dataJson: jsonOf(data) })),
        },
        options,
      );
      return { records: response.records.map(shown) };
    },
  };
}
