import { randomBytes } from "node:crypto";
import {
  Code,
  ConnectError,
  callAs,
  createServiceClient,
  errorInfoOf,
  freePort,
} from "@rowbase/kit";
import {
  FilesService,
  type UploadFileRequest,
} from "@rowbase/proto/rowbase/files/v1/files_service_pb";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { startTestSystem, type TestService, type TestSystem } from "@rowbase/standalone/testing";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SignedUpUser, signUp } from "./support/accounts.js";
import { client } from "./support/http.js";
import { createOrg, q } from "./support/organizations.js";

/**
 * GetLimits' usage.file_storage_bytes is what the real files service counts
 * (FilesService.GetStorageUsage, which answers services only), not the organization service's
 * own column. To see the organization service meet a files service that is down and back, the
 * test runs one more organization process and one more files process beside the system, on the
 * same database, cache and bus (replicas, as deployed), the organization one asking that files
 * one, which the test stops and starts again on its port.
 */

let sys: TestSystem;
let api: ReturnType<typeof client>;
let db: pg.Client;
let filesPort: number;
let files: TestService<"files"> | undefined;
let organization: TestService<"organization">;

/** The test's own files process, on its fixed port. */
const startOwnFiles = () => sys.replica("files", { GRPC_PORT: String(filesPort) });

beforeAll(async () => {
  sys = await startTestSystem();
  api = client(sys.baseUrl);
  db = new pg.Client({ connectionString: sys.databaseUrl });
  await db.connect();
  filesPort = await freePort();
  files = await startOwnFiles();
  organization = await sys.replica("organization", {
    FILES_GRPC_URL: `http://127.0.0.1:${filesPort}`,
  });
});

afterAll(async () => {
  await db?.end();
  await sys?.stop();
});

const asUser = (user: SignedUpUser) =>
  callAs(sys.internalJwtSecret, {
    kind: "user",
    userId: BigInt(user.id),
    sessionId: crypto.randomUUID(),
  });

/** An organization with a table of one file field and a record in it. */
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
    body: { name: "Reports", fields: [{ name: "Doc", type: "file" }] },
  });
  expect(table.status, JSON.stringify(table.body)).toBe(200);
  const tableId: number = table.body.data.table.table_id;
  const record = await api("POST", "/public/record/create", {
    token: owner.token,
    query: q({ table_id: tableId }),
    body: { data: {} },
  });
  expect(record.status, JSON.stringify(record.body)).toBe(200);
  return {
    owner,
    organizationId: BigInt(orgId),
    rowId: BigInt(record.body.data.record.row_id),
    fieldId: BigInt(table.body.data.fields[0].field_id),
  };
}

async function* uploadMessages(
  rowId: bigint,
  fieldId: bigint,
  bytes: Buffer,
): AsyncGenerator<UploadFileRequest> {
  yield {
    $typeName: "rowbase.files.v1.UploadFileRequest",
    payload: {
      case: "header",
      value: {
        $typeName: "rowbase.files.v1.UploadFileHeader",
        rowId,
        fieldId,
        fileName: "stored.bin",
        declaredSize: BigInt(bytes.length),
      },
    },
  };
  yield {
    $typeName: "rowbase.files.v1.UploadFileRequest",
    payload: { case: "chunk", value: bytes },
  };
}

describe("file storage in GetLimits", () => {
  it("is what the files service counts, asked as the organization service", async () => {
    const { owner, organizationId, rowId, fieldId } = await workspace();
    const bytes = randomBytes(1234);
    await createServiceClient(FilesService, sys.system.grpcUrls.files).uploadFile(
      uploadMessages(rowId, fieldId, bytes),
      await asUser(owner),
    );
    // The local counter says otherwise: the files service's figure wins.
    await db.query(
      "update organization.organization_usage set file_storage_bytes = 7 where organization_id = $1",
      [organizationId.toString()],
    );
    for (const url of [sys.system.grpcUrls.organization, organization.url]) {
      const org = createServiceClient(OrganizationService, url);
      const limits = await org.getLimits({ organizationId }, await asUser(owner));
      expect(limits.usage?.fileStorageBytes).toBe(BigInt(bytes.length));
    }
    // Files tells the figure to services only, so the organization service asked as one.
    const filesClient = createServiceClient(FilesService, `http://127.0.0.1:${filesPort}`);
    const refused = await filesClient.getStorageUsage({ organizationId }, await asUser(owner)).then(
      () => undefined,
      (error: unknown) => errorInfoOf(error)?.reason,
    );
    expect(refused).toBe("internal_only");
    const asOrganization = await filesClient.getStorageUsage(
      { organizationId },
      await callAs(sys.internalJwtSecret, { kind: "service", service: "organization" }),
    );
    expect(asOrganization.fileStorageBytes).toBe(BigInt(bytes.length));
  });

  it("fails with Unavailable when the files service cannot be reached", async () => {
    const { owner, organizationId, rowId, fieldId } = await workspace();
    const bytes = randomBytes(500);
    await createServiceClient(FilesService, sys.system.grpcUrls.files).uploadFile(
      uploadMessages(rowId, fieldId, bytes),
      await asUser(owner),
    );
    const org = createServiceClient(OrganizationService, organization.url);
    await files?.stop();
    files = undefined;
    try {
      await org.getLimits({ organizationId }, await asUser(owner));
      expect.unreachable("GetLimits answered without the files service");
    } catch (error) {
      expect(error).toBeInstanceOf(ConnectError);
      expect((error as ConnectError).code).toBe(Code.Unavailable);
    }
    files = await startOwnFiles();
    const limits = await org.getLimits({ organizationId }, await asUser(owner));
    expect(limits.usage?.fileStorageBytes).toBe(BigInt(bytes.length));
  });
});
