import { createHash } from "node:crypto";
import { callAs, createServiceClient } from "@rowbase/kit";
import {
  FilesService,
  type UploadFileRequest,
} from "@rowbase/proto/rowbase/files/v1/files_service_pb";
import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SignedUpUser, signUp } from "./support/accounts.js";
import { client } from "./support/http.js";
import { createOrg, q } from "./support/organizations.js";

/**
 * The files service's figures reach the REST answers through the standalone wiring
 * (FILES_GRPC_URL of records and organization): GET /organization/limits shows the stored bytes
 * and a record's file field shows the live FileInfo, as the file routes answer it.
 * Files are uploaded with FilesService.UploadFile as the signed-in owner, as the gateway would.
 */

type Api = ReturnType<typeof client>;

let sys: TestSystem;
let api: Api;

beforeAll(async () => {
  sys = await startTestSystem();
  api = client(sys.baseUrl);
});

afterAll(async () => {
  await sys?.stop();
});

async function* uploadMessages(
  rowId: number,
  fieldId: number,
  fileName: string,
  bytes: Buffer,
): AsyncGenerator<UploadFileRequest> {
  yield {
    $typeName: "rowbase.files.v1.UploadFileRequest",
    payload: {
      case: "header",
      value: {
        $typeName: "rowbase.files.v1.UploadFileHeader",
        rowId: BigInt(rowId),
        fieldId: BigInt(fieldId),
        fileName,
        declaredSize: BigInt(bytes.length),
      },
    },
  };
  yield {
    $typeName: "rowbase.files.v1.UploadFileRequest",
    payload: { case: "chunk", value: bytes },
  };
}

async function upload(owner: SignedUpUser, rowId: number, fieldId: number, bytes: Buffer) {
  const files = createServiceClient(FilesService, sys.system.grpcUrls.files);
  const { file } = await files.uploadFile(
    uploadMessages(rowId, fieldId, "report.txt", bytes),
    await callAs(sys.internalJwtSecret, {
      kind: "user",
      userId: BigInt(owner.id),
      sessionId: crypto.randomUUID(),
    }),
  );
  return file!;
}

async function storageUsed(owner: SignedUpUser, orgId: number): Promise<unknown> {
  const limits = await api("GET", "/organization/limits", {
    token: owner.token,
    query: q({ organization_id: orgId }),
  });
  expect(limits.status, JSON.stringify(limits.body)).toBe(200);
  return limits.body.data.usage.file_storage_bytes;
}

/** An organization with a table of a file field and a text field, and one record in it. */
async function workspace() {
  const owner = await signUp(sys, api);
  const orgId = (await createOrg(api, owner)).organization_id;
  const database = await api("POST", "/database/create", {
    token: owner.token,
    query: q({ organization_id: orgId }),
    body: { name: "Files" },
  });
  expect(database.status, JSON.stringify(database.body)).toBe(200);
  const table = await api("POST", "/table/create", {
    token: owner.token,
    query: q({ database_id: database.body.data.database.database_id }),
    body: {
      name: "Reports",
      fields: [
        { name: "Doc", type: "file" },
        { name: "Title", type: "text" },
      ],
    },
  });
  expect(table.status, JSON.stringify(table.body)).toBe(200);
  const tableId: number = table.body.data.table.table_id;
  const docId: number = table.body.data.fields.find(
    (f: { name: string }) => f.name === "Doc",
  ).field_id;
  const record = await api("POST", "/public/record/create", {
    token: owner.token,
    query: q({ table_id: tableId }),
    body: { data: { Title: "Q1" } },
  });
  expect(record.status, JSON.stringify(record.body)).toBe(200);
  return { owner, orgId, tableId, docId, rowId: record.body.data.record.row_id as number };
}

describe("file storage in the limits", () => {
  it("shows the bytes uploaded as usage.file_storage_bytes", async () => {
    const { owner, orgId, rowId, docId } = await workspace();
    expect(await storageUsed(owner, orgId)).toBe(0);

    const bytes = Buffer.from("quarterly figures, 1234567890\n".repeat(40));
    const file = await upload(owner, rowId, docId, bytes);
    expect(Number(file.size)).toBe(bytes.length);
    expect(await storageUsed(owner, orgId)).toBe(bytes.length);

    // A replaced file is soft-deleted and counts until it is purged.
    const second = Buffer.from("revised\n");
    await upload(owner, rowId, docId, second);
    expect(await storageUsed(owner, orgId)).toBe(bytes.length + second.length);
  });

  it("counts each organization's own files only", async () => {
    const other = await workspace();
    expect(await storageUsed(other.owner, other.orgId)).toBe(0);
  });
});

describe("file fields in record responses", () => {
  it("show the live FileInfo, then null once the file is deleted", async () => {
    const { owner, tableId, docId, rowId } = await workspace();
    const get = () =>
      api("GET", "/public/record/get", {
        token: owner.token,
        query: q({ table_id: tableId, row_id: rowId, response_format: "names" }),
      });
    expect((await get()).body.data.record.data.Doc).toBeNull();

    const bytes = Buffer.from("hello from the record\n");
    await upload(owner, rowId, docId, bytes);
    const shown = await get();
    expect(shown.status, JSON.stringify(shown.body)).toBe(200);
    expect(shown.body.data.record.data).toEqual({
      Title: "Q1",
      Doc: {
        row_id: rowId,
        field_id: docId,
        file_name: "report.txt",
        content_type: "text/plain",
        size: bytes.length,
        sha256: createHash("sha256").update(bytes).digest("hex"),
        created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
        updated_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
        deleted_at: null,
      },
    });

    const files = createServiceClient(FilesService, sys.system.grpcUrls.files);
    await files.deleteFile(
      { rowId: BigInt(rowId), fieldId: BigInt(docId) },
      await callAs(sys.internalJwtSecret, {
        kind: "user",
        userId: BigInt(owner.id),
        sessionId: crypto.randomUUID(),
      }),
    );
    expect((await get()).body.data.record.data.Doc).toBeNull();
  });
});
