import { readdir } from "node:fs/promises";
import path from "node:path";
import { create, type JsonObject } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import { createServiceClient, type Principal } from "@rowbase/kit";
import {
  as,
  eventsOf,
  failureOf,
  reasonOf,
  TEST_SECRET,
  type TestStack,
  validationOf,
} from "@rowbase/kit/testing";
import { FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import type { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import type { ByteRange, FileServeHeader } from "@rowbase/proto/rowbase/files/v1/files_pb";
import {
  FilesService,
  type UploadFileRequest,
} from "@rowbase/proto/rowbase/files/v1/files_service_pb";
import { PlanLimitsSchema, PlanName } from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import type { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import type { RecordsService } from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import {
  createTestTeam,
  startS3Server,
  startTestServices,
  type TestTeam,
  type TestUser,
} from "@rowbase/standalone/testing";
import { expect } from "vitest";
import { migrateFiles, type RunningFiles } from "../src/index.js";

export type { TestUser };
export { as, eventsOf, failureOf, reasonOf, TEST_SECRET as SECRET, validationOf };

export type Backend = "directory" | "s3";

/** One more files process on the same database, cache and bus: another replica. */
export interface Replica {
  files: Client<typeof FilesService>;
  stop(): Promise<void>;
}

export interface Harness extends Pick<TestStack, "db" | "cache" | "bus" | "logger" | "events"> {
  backend: Backend;
  files: Client<typeof FilesService>;
  records: Client<typeof RecordsService>;
  catalog: Client<typeof CatalogService>;
  org: Client<typeof OrganizationService>;
  running: RunningFiles;
  /** The storage keys whose bytes are in the backend now. */
  storedKeys(): Promise<Set<string>>;
  /** A registered user with a verified e-mail. */
  user(name?: string): Promise<TestUser>;
  /** Starts another files process with extra environment (a replica). */
  replica(env?: Record<string, string>): Promise<Replica>;
  stop(): Promise<void>;
}

let counter = 0;

/** An API token of an organization, as the gateway passes it on after resolving it. */
export function token(organizationId: bigint, access: "read" | "read_write"): Principal {
  counter += 1;
  return { kind: "api_token", tokenId: BigInt(5000 + counter), organizationId, access };
}

export const OPERATOR: Principal = { kind: "operator", name: "test" };
/** Another Rowbase service (records asking for file field values). */
export const SERVICE: Principal = { kind: "service", service: "records" };

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  return entries.filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name));
}

/**
 * The real identity, organization, catalog, records and files services against one fresh
 * database, Redis under a unique prefix, NATS under a unique namespace, a mail catcher for codes,
 * and the files bytes in a temporary directory or in a local S3 server (s3rver).
 */
export async function startHarness(backend: Backend): Promise<Harness> {
  const s3 = backend === "s3" ? await startS3Server() : undefined;
  const services = await startTestServices({
    through: "files",
    env: { files: s3?.env ?? {} },
    record: ["CATALOG", "ORG", "AUDIT", "RECORDS"],
  });
  const { stack } = services;
  expect(services.migrated.files).toEqual(["InitialSchema", "ProcessedEvents"]);
  expect(await migrateFiles(stack.databaseUrl)).toEqual([]);
  const running = services.service("files").service;
  expect(running.blobs.kind).toBe(backend);

  return {
    backend,
    files: services.client("files"),
    records: services.client("records"),
    catalog: services.client("catalog"),
    org: services.client("organization"),
    running,
    db: stack.db,
    cache: stack.cache,
    bus: stack.bus,
    logger: stack.logger,
    events: stack.events,
    async storedKeys() {
      if (s3) {
        const objects = await filesUnder(path.join(s3.directory, s3.env.S3_BUCKET));
        return new Set(
          objects
            .filter((f) => f.endsWith("._S3rver_object"))
            .map((f) => path.basename(f, "._S3rver_object")),
        );
      }
      const stored = await filesUnder(services.filesDir);
      return new Set(
        stored
          .filter((f) => !f.includes(`${path.sep}.partial${path.sep}`))
          .map((f) => path.basename(f)),
      );
    },
    user: (name = "Ada") => services.user(name),
    async replica(env = {}) {
      const replica = await services.replica("files", env);
      return {
        files: createServiceClient(FilesService, replica.url),
        stop: () => replica.stop(),
      };
    },
    async stop() {
      await services.stop();
      await s3?.close();
    },
  };
}

export type Team = TestTeam<"editor" | "viewer">;

/** Limits small enough to reach in a test (an enterprise plan). */
export const SMALL_LIMITS = {
  records: 1000n,
  apiCallsPerMonth: 1000n,
  fileStorageBytes: 10_000n,
  transferBytesPerMonth: 1_000_000n,
  members: 10n,
  maxFileBytes: 5_000n,
};

/** An organization with an editor and a viewer, and an outsider with an organization of their own. */
export const team = (h: Harness, limits?: typeof SMALL_LIMITS): Promise<Team> =>
  createTestTeam(
    h.org,
    h.user,
    ["editor", "viewer"],
    limits
      ? { plan: PlanName.ENTERPRISE, enterpriseLimits: create(PlanLimitsSchema, limits) }
      : { plan: PlanName.PLUS },
  );

function def(name: string, type: FieldType, options?: JsonObject) {
  return { name, type, ...(options ? { options } : {}), required: false, description: "" };
}

/** A table with a text field, a plain file field and a file field taking small images only. */
export interface Workspace {
  databaseId: bigint;
  tableId: bigint;
  /** Text. */
  name: bigint;
  /** File, no options. */
  doc: bigint;
  /** File, max_size 1000, allowed_types image/*. */
  picture: bigint;
}

export async function workspace(
  h: Harness,
  owner: TestUser,
  organizationId: bigint,
): Promise<Workspace> {
  const call = await as(owner);
  const { database } = await h.catalog.createDatabase(
    { organizationId, name: "Files", description: "" },
    call,
  );
  const { table, fields } = await h.catalog.createTable(
    {
      databaseId: database!.databaseId,
      name: `T${++counter}`,
      description: "",
      fields: [
        def("Name", FieldType.TEXT),
        def("Doc", FieldType.FILE),
        def("Picture", FieldType.FILE, { max_size: 1000, allowed_types: ["image/*"] }),
      ],
    },
    call,
  );
  const id = (name: string) => fields.find((f) => f.name === name)!.fieldId;
  return {
    databaseId: database!.databaseId,
    tableId: table!.tableId,
    name: id("Name"),
    doc: id("Doc"),
    picture: id("Picture"),
  };
}

/** A new record of the workspace's table. */
export async function record(h: Harness, who: TestUser, ws: Workspace): Promise<bigint> {
  const { record } = await h.records.createRecord(
    { tableId: ws.tableId, dataJson: JSON.stringify({ Name: `Row ${++counter}` }) },
    await as(who),
  );
  return record!.rowId;
}

/** The messages of an upload: the header, then the bytes in chunks. */
export async function* uploadMessages(
  header: { rowId: bigint; fieldId: bigint; fileName?: string; declaredSize?: bigint },
  content: Uint8Array | string,
  chunkSize = 16 * 1024,
): AsyncGenerator<UploadFileRequest> {
  const bytes = typeof content === "string" ? Buffer.from(content, "utf8") : content;
  yield {
    $typeName: "rowbase.files.v1.UploadFileRequest",
    payload: {
      case: "header",
      value: {
        $typeName: "rowbase.files.v1.UploadFileHeader",
        rowId: header.rowId,
        fieldId: header.fieldId,
        fileName: header.fileName ?? "file.bin",
        declaredSize: header.declaredSize ?? 0n,
      },
    },
  };
  for (let offset = 0; offset < bytes.length; offset += chunkSize) {
    yield {
      $typeName: "rowbase.files.v1.UploadFileRequest",
      payload: { case: "chunk", value: bytes.subarray(offset, offset + chunkSize) },
    };
  }
}

/** Reads a served stream: its header and all bytes. */
export async function collect(
  stream: AsyncIterable<{
    payload:
      | { case: "header"; value: FileServeHeader }
      | { case: "chunk"; value: Uint8Array }
      | { case: undefined; value?: undefined };
  }>,
): Promise<{ header: FileServeHeader; bytes: Buffer; messages: number }> {
  let header: FileServeHeader | undefined;
  const parts: Buffer[] = [];
  let messages = 0;
  for await (const message of stream) {
    messages += 1;
    if (message.payload.case === "header") {
      expect(messages).toBe(1);
      header = message.payload.value;
    } else if (message.payload.case === "chunk") {
      expect(header).toBeDefined();
      parts.push(Buffer.from(message.payload.value));
    }
  }
  expect(header).toBeDefined();
  return { header: header!, bytes: Buffer.concat(parts), messages };
}

export function range(first: bigint, last?: bigint, suffixLength?: bigint): ByteRange {
  return {
    $typeName: "rowbase.files.v1.ByteRange",
    first,
    ...(last !== undefined ? { last } : {}),
    ...(suffixLength !== undefined ? { suffixLength } : {}),
  } as ByteRange;
}
