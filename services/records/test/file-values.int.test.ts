import { createHash } from "node:crypto";
import type { JsonObject } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { Code, freePort } from "@rowbase/kit";
import { FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import type { FileInfo } from "@rowbase/proto/rowbase/files/v1/files_pb";
import { ResponseFormat } from "@rowbase/proto/rowbase/records/v1/records_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  as,
  createTable,
  def,
  failureOf,
  type Harness,
  type Replica,
  startHarness,
  type Team,
  type TestTable,
  team,
  uploadMessages,
} from "./harness.js";
import { storedRows } from "./stored.js";

// File fields show the pair's live FileInfo from the files service: one
// ListRecordFiles call per response, null without a live file, 503 when files cannot be reached.

let h: Harness;
let t: Team;
let table: TestTable;
let rowA: bigint;
let rowB: bigint;

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

beforeAll(async () => {
  h = await startHarness();
  t = await team(h);
  table = await createTable(h, t.owner, t.organizationId, [
    def("Name", FieldType.TEXT),
    def("Doc", FieldType.FILE),
    def("Picture", FieldType.FILE),
  ]);
  const created = await h.records.batchCreateRecords(
    { tableId: table.tableId, records: [{ data: { Name: "A" } }, { data: { Name: "B" } }] },
    await as(t.editor),
  );
  [rowA, rowB] = created.records.map((record) => record.rowId) as [bigint, bigint];
});

afterAll(async () => {
  await h?.stop();
});

async function upload(rowId: bigint, field: string, fileName: string, content: string) {
  const { file } = await h.files.uploadFile(
    uploadMessages({ rowId, fieldId: BigInt(table.id[field]!), fileName }, content),
    await as(t.editor),
  );
  return file!;
}

/** The FileInfo as a file field must show it, with the REST key names. */
function shown(file: FileInfo): JsonObject {
  return {
    row_id: Number(file.rowId),
    field_id: Number(file.fieldId),
    file_name: file.fileName,
    content_type: file.contentType,
    size: Number(file.size),
    sha256: file.sha256,
    created_at: timestampDate(file.createdAt!).toISOString(),
    updated_at: timestampDate(file.updatedAt!).toISOString(),
    deleted_at: null,
  };
}

async function getData(rowId: bigint, fieldList = "") {
  const { record } = await h.records.getRecord(
    { tableId: table.tableId, rowId, fieldList },
    await as(t.viewer),
  );
  return record!.data!;
}

async function listData(): Promise<Map<bigint, JsonObject>> {
  const { records } = await h.records.listRecords(
    { tableId: table.tableId, databaseId: table.databaseId },
    await as(t.viewer),
  );
  return new Map(records.map((record) => [record.rowId, record.data!]));
}

describe("file fields", () => {
  let doc: FileInfo;

  it("show null while the pair has no file", async () => {
    const data = await getData(rowA);
    expect(data[table.id.Doc!]).toBeNull();
    expect(data[table.id.Picture!]).toBeNull();
  });

  it("show the uploaded file's FileInfo in get and list, and only for its pair", async () => {
    doc = await upload(rowA, "Doc", "notes.txt", "hello, file fields");
    expect(doc.size).toBe(18n);

    const data = await getData(rowA);
    expect(data[table.id.Doc!]).toEqual(shown(doc));
    expect(data[table.id.Doc!]).toEqual({
      row_id: Number(rowA),
      field_id: Number(table.id.Doc),
      file_name: "notes.txt",
      content_type: "text/plain",
      size: 18,
      sha256: createHash("sha256").update("hello, file fields").digest("hex"),
      created_at: expect.stringMatching(ISO_MS),
      updated_at: expect.stringMatching(ISO_MS),
      deleted_at: null,
    });
    expect(data[table.id.Picture!]).toBeNull();
    expect(data[table.id.Name!]).toBe("A");

    const listed = await listData();
    expect(listed.get(rowA)![table.id.Doc!]).toEqual(shown(doc));
    expect(listed.get(rowA)![table.id.Picture!]).toBeNull();
    expect(listed.get(rowB)![table.id.Doc!]).toBeNull();
  });

  it("show under the field's name with response_format=names and a fields selection", async () => {
    const { record } = await h.records.getRecord(
      {
        tableId: table.tableId,
        rowId: rowA,
        responseFormat: ResponseFormat.NAMES,
        fieldList: "Doc",
      },
      await as(t.viewer),
    );
    expect(record!.data).toEqual({ Doc: shown(doc) });
  });

  it("show in the answers of updates, single and batch", async () => {
    const { record } = await h.records.updateRecord(
      { tableId: table.tableId, rowId: rowA, data: { Name: "A2" } },
      await as(t.editor),
    );
    expect(record!.data![table.id.Doc!]).toEqual(shown(doc));

    const picture = await upload(rowB, "Picture", "b.txt", "second");
    const { records } = await h.records.batchUpdateRecords(
      {
        tableId: table.tableId,
        records: [
          { rowId: rowA, data: { Name: "A3" } },
          { rowId: rowB, data: { Name: "B2" } },
        ],
      },
      await as(t.editor),
    );
    expect(records.map((r) => [r.data![table.id.Doc!], r.data![table.id.Picture!]])).toEqual([
      [shown(doc), null],
      [null, shown(picture)],
    ]);
  });

  it("show null in a new record (no row has files before it exists)", async () => {
    const { record } = await h.records.createRecord(
      { tableId: table.tableId, data: { Name: "C" } },
      await as(t.editor),
    );
    expect(record!.data![table.id.Doc!]).toBeNull();
    expect(record!.data![table.id.Picture!]).toBeNull();
  });

  it("show the newer file after a replacing upload", async () => {
    const replacement = await upload(rowA, "Doc", "notes-v2.txt", "hello again");
    expect(replacement.fileName).toBe("notes-v2.txt");
    expect((await getData(rowA))[table.id.Doc!]).toEqual(shown(replacement));
    doc = replacement;
  });

  it("show null again once the file is deleted, in get and list", async () => {
    const { file } = await h.files.deleteFile(
      { rowId: rowA, fieldId: BigInt(table.id.Doc!) },
      await as(t.editor),
    );
    expect(file!.deletedAt).toBeDefined();

    expect((await getData(rowA))[table.id.Doc!]).toBeNull();
    const listed = await listData();
    expect(listed.get(rowA)![table.id.Doc!]).toBeNull();
    expect(listed.get(rowB)![table.id.Picture!]).not.toBeNull();
  });
});

describe("a files service that cannot be reached", () => {
  let replica: Replica;

  beforeAll(async () => {
    // Nothing listens on this port: every call to files fails to connect.
    replica = await h.replica({ FILES_GRPC_URL: `http://127.0.0.1:${await freePort()}` });
  });

  afterAll(async () => {
    await replica?.stop();
  });

  it("fails reads that show a file field with Unavailable, never with a null", async () => {
    const call = await as(t.viewer);
    expect(
      (await failureOf(replica.records.getRecord({ tableId: table.tableId, rowId: rowB }, call)))
        .code,
    ).toBe(Code.Unavailable);
    expect(
      (
        await failureOf(
          replica.records.listRecords(
            { tableId: table.tableId, databaseId: table.databaseId },
            call,
          ),
        )
      ).code,
    ).toBe(Code.Unavailable);
  });

  it("refuses an update with Unavailable and writes nothing", async () => {
    const failure = await failureOf(
      replica.records.updateRecord(
        { tableId: table.tableId, rowId: rowB, data: { Name: "never" } },
        await as(t.editor),
      ),
    );
    expect(failure.code).toBe(Code.Unavailable);
    const [row] = await storedRows(h, table.tableId, [rowB]);
    expect(row!.data[table.id.Name!]).toBe("B2");
  });

  it("does not ask files when no file field is shown, nor for a create", async () => {
    const call = await as(t.editor);
    const { record } = await replica.records.getRecord(
      { tableId: table.tableId, rowId: rowB, fieldList: "Name" },
      call,
    );
    expect(record!.data).toEqual({ [table.id.Name!]: "B2" });
    const { records } = await replica.records.listRecords(
      { tableId: table.tableId, fieldList: "Name", limit: 1000 },
      call,
    );
    expect(records.map((r) => r.rowId)).toContain(rowB);
    const created = await replica.records.createRecord(
      { tableId: table.tableId, data: { Name: "D" } },
      call,
    );
    expect(created.record!.data![table.id.Doc!]).toBeNull();

    const plain = await createTable(h, t.owner, t.organizationId, [def("Name", FieldType.TEXT)]);
    const made = await replica.records.createRecord(
      { tableId: plain.tableId, data: { Name: "x" } },
      call,
    );
    const { record: read } = await replica.records.getRecord(
      { tableId: plain.tableId, rowId: made.record!.rowId },
      call,
    );
    expect(read!.data).toEqual({ [plain.id.Name!]: "x" });
  });
});
