import { Code, ConnectError } from "@connectrpc/connect";
import { catalogEnv } from "@rowbase/catalog";
import { filesEnv } from "@rowbase/files";
import { generateSigningKey, identityEnv } from "@rowbase/identity";
import { callAs, createServiceClient, type Principal } from "@rowbase/kit";
import { organizationEnv } from "@rowbase/organization";
import { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import { FilesService } from "@rowbase/proto/rowbase/files/v1/files_service_pb";
import { IdentityService } from "@rowbase/proto/rowbase/identity/v1/identity_service_pb";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { RecordsService } from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import { recordsEnv } from "@rowbase/records";
import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const PREVIOUS = "the-previous-internal-secret-of-32-char";
const UNRELATED = "an-unrelated-internal-secret-of-32-chars";
const CALLER: Principal = { kind: "service", service: "gateway" };

let sys: TestSystem;

beforeAll(async () => {
  sys = await startTestSystem({ INTERNAL_JWT_SECRET_PREVIOUS: PREVIOUS });
});

afterAll(async () => {
  await sys?.stop();
});

/** One internal RPC of each service, called as another Rowbase process with `secret`. */
const CALLS: Record<string, (secret: string) => Promise<unknown>> = {
  identity: async (secret) =>
    createServiceClient(IdentityService, sys.system.grpcUrls.identity).getUsers(
      { ids: [1n] },
      await callAs(secret, CALLER),
    ),
  organization: async (secret) =>
    createServiceClient(OrganizationService, sys.system.grpcUrls.organization).getPlan(
      { organizationId: 1n },
      await callAs(secret, CALLER),
    ),
  catalog: async (secret) =>
    createServiceClient(CatalogService, sys.system.grpcUrls.catalog).getTableSchema(
      { tableId: 1n },
      await callAs(secret, CALLER),
    ),
  records: async (secret) =>
    createServiceClient(RecordsService, sys.system.grpcUrls.records).getRecordUsage(
      { organizationId: 1n },
      await callAs(secret, CALLER),
    ),
  files: async (secret) =>
    createServiceClient(FilesService, sys.system.grpcUrls.files).getStorageUsage(
      { organizationId: 1n },
      await callAs(secret, CALLER),
    ),
};

/** The call's gRPC code, "ok" when it answers. */
async function codeOf(call: Promise<unknown>): Promise<string> {
  try {
    await call;
    return "ok";
  } catch (error) {
    return Code[ConnectError.from(error).code];
  }
}

describe("INTERNAL_JWT_SECRET_PREVIOUS", () => {
  it.each(Object.keys(CALLS))("lets %s accept principals signed with it", async (service) => {
    const call = CALLS[service]!;
    const current = await codeOf(call(sys.internalJwtSecret));
    expect(current).not.toBe("Unauthenticated");
    // The same answer as for the current secret: the caller is known either way.
    expect(await codeOf(call(PREVIOUS))).toBe(current);
    expect(await codeOf(call(UNRELATED))).toBe("Unauthenticated");
  });

  it.each([
    ["identity", identityEnv],
    ["organization", organizationEnv],
    ["catalog", catalogEnv],
    ["records", recordsEnv],
    ["files", filesEnv],
  ] as const)("is held by %s to the current secret's rules", async (_, schema) => {
    const base = {
      JWT_SIGNING_KEYS: JSON.stringify([await generateSigningKey()]),
      DATABASE_URL: "postgres://localhost/rowbase",
      INTERNAL_JWT_SECRET: "c".repeat(32),
      FILE_URL_SECRET: "f".repeat(32),
      ORGANIZATION_GRPC_URL: "http://localhost:50052",
      CATALOG_GRPC_URL: "http://localhost:50053",
      RECORDS_GRPC_URL: "http://localhost:50054",
      IDENTITY_GRPC_URL: "http://localhost:50051",
    };
    const short = schema.safeParse({ ...base, INTERNAL_JWT_SECRET_PREVIOUS: "p".repeat(31) });
    expect(short.success).toBe(false);
    expect(short.error?.issues.map((issue) => issue.path.join("."))).toEqual([
      "INTERNAL_JWT_SECRET_PREVIOUS",
    ]);
    const given = schema.parse({ ...base, INTERNAL_JWT_SECRET_PREVIOUS: "p".repeat(32) });
    expect(given.INTERNAL_JWT_SECRET_PREVIOUS).toBe("p".repeat(32));
    // An empty value from a manifest means none.
    expect(
      schema.parse({ ...base, INTERNAL_JWT_SECRET_PREVIOUS: "" }).INTERNAL_JWT_SECRET_PREVIOUS,
    ).toBeUndefined();
  });
});
