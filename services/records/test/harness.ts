import type { JsonObject } from "@bufbuild/protobuf";
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
import { type Field, FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import type {
  FilesService,
  UploadFileRequest,
} from "@rowbase/proto/rowbase/files/v1/files_service_pb";
import type { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { RecordsService } from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import {
  createTestTeam,
  startTestServices,
  type TestTeam,
  type TestUser,
} from "@rowbase/standalone/testing";
import { expect } from "vitest";
import { migrateRecords } from "../src/index.js";
import { type JsonRecordsClient, jsonRecordsClient } from "./json-records-client.js";
import { appliedFrom } from "./sql-files.js";

export type { TestUser };
export { as, eventsOf, failureOf, reasonOf, TEST_SECRET as SECRET, validationOf };

/** One more records process on the same database, cache and bus: another replica. */
export interface Replica {
  records: JsonRecordsClient;
  stop(): Promise<void>;
}

/** One more catalog process on the same database, cache and bus. */
export interface CatalogReplica {
  catalog: Client<typeof CatalogService>;
  stop(): Promise<void>;
}

export interface Harness
  extends Pick<
    TestStack,
    "db" | "databaseUrl" | "cache" | "bus" | "logger" | "events" | "natsUrl" | "namespace"
  > {
  /** The records service, with record values as objects (see json-records-client.ts). */
  records: JsonRecordsClient;
  files: Client<typeof FilesService>;
  catalog: Client<typeof CatalogService>;
  org: Client<typeof OrganizationService>;
  /** A registered user with a verified e-mail. */
  user(name?: string): Promise<TestUser>;
  /** Starts another records process with extra environment (a replica). */
  replica(env?: Record<string, string>): Promise<Replica>;
  /**
   * Starts another catalog process with extra environment (a replica; RECORDS_GRPC_URL, say,
   * somewhere else).
   */
  catalogReplica(env?: Record<string, string>): Promise<CatalogReplica>;
  stop(): Promise<void>;
}

let counter = 0;

/** An API token of an organization, as the gateway passes it on after resolving it. */
export function token(organizationId: bigint, access: "read" | "read_write"): Principal {
  counter += 1;
  return { kind: "api_token", tokenId: BigInt(1000 + counter), organizationId, access };
}

export const OPERATOR: Principal = { kind: "operator", name: "test" };
export const SERVICE: Principal = { kind: "service", service: "test" };

/**
 * The real identity, organization, catalog, records and files services against one fresh
 * database (of `databaseLocale` when given, else of the server's default; records with `env`
 * over its environment when given), Redis under a unique prefix, NATS under a unique
 * namespace, a mail catcher for codes and the files' bytes in a temporary directory. Organization asks records and files for usage, catalog asks records
 * about type changes and records asks files for file fields, as deployed.
 */
export async function startHarness(
  options: {
    databaseLocale?: string;
    /** Environment over the records service's (its replicas' too). */
    env?: { records?: Record<string, string> };
  } = {},
): Promise<Harness> {
  const services = await startTestServices({
    through: "files",
    record: ["CATALOG", "ORG", "AUDIT", "RECORDS"],
    ...options,
  });
  const { stack } = services;
  expect(services.migrated.records).toEqual(appliedFrom());
  expect(await migrateRecords(stack.databaseUrl)).toEqual([]);

  return {
    records: jsonRecordsClient(services.client("records")),
    files: services.client("files"),
    catalog: services.client("catalog"),
    org: services.client("organization"),
    db: stack.db,
    natsUrl: stack.natsUrl,
    namespace: stack.namespace,
    databaseUrl: stack.databaseUrl,
    cache: stack.cache,
    bus: stack.bus,
    logger: stack.logger,
    events: stack.events,
    user: (name = "Ada") => services.user(name),
    async replica(env = {}) {
      const replica = await services.replica("records", env);
      return {
        records: jsonRecordsClient(createServiceClient(RecordsService, replica.url)),
        stop: () => replica.stop(),
      };
    },
    async catalogReplica(env = {}) {
      const replica = await services.replica("catalog", env);
      return {
        catalog: createServiceClient(CatalogService, replica.url),
        stop: () => replica.stop(),
      };
    },
    stop: () => services.stop(),
  };
}

export type Team = TestTeam<"editor" | "viewer">;

/** An organization on the plus plan with an editor and a viewer, and an outsider elsewhere. */
export const team = (h: Harness): Promise<Team> =>
  createTestTeam(h.org, h.user, ["editor", "viewer"]);

/** A field definition for CreateTable. */
export function def(
  name: string,
  type: FieldType,
  options?: JsonObject,
  required = false,
): { name: string; type: FieldType; options?: JsonObject; required: boolean; description: string } {
  return { name, type, ...(options ? { options } : {}), required, description: "" };
}

/** One field of every type. */
export const ALL_TYPES = [
  def("Name", FieldType.TEXT, { max_length: 50 }),
  def("Notes", FieldType.LONG_TEXT),
  def("Age", FieldType.NUMBER, { decimals: 1, min: -100, max: 1000 }),
  def("Vip", FieldType.BOOLEAN),
  def("Due", FieldType.DATE),
  def("At", FieldType.DATETIME),
  def("Status", FieldType.SINGLE_SELECT, {
    choices: [{ name: "Active" }, { name: "Done" }, { name: "Act%ive_" }],
  }),
  def("Tags", FieldType.MULTI_SELECT, {
    choices: [{ name: "a" }, { name: "b" }, { name: "a,b" }, { name: "c" }],
  }),
  def("Email", FieldType.EMAIL),
  def("Site", FieldType.URL),
  def("Phone", FieldType.PHONE),
  def("Meta", FieldType.JSON),
  def("Doc", FieldType.FILE),
  def("Seq", FieldType.AUTONUMBER),
  def("Created", FieldType.CREATED_AT),
  def("Updated", FieldType.UPDATED_AT),
];

export interface TestTable {
  databaseId: bigint;
  tableId: bigint;
  fields: Field[];
  /** Field id (decimal string) by field name. */
  id: Record<string, string>;
}

/** A new database with one table of the given fields, created by `owner`. */
export async function createTable(
  h: Harness,
  owner: TestUser,
  organizationId: bigint,
  fields: ReturnType<typeof def>[] = ALL_TYPES,
  name = "Things",
): Promise<TestTable> {
  const call = await as(owner);
  const { database } = await h.catalog.createDatabase(
    { organizationId, name: "Base", description: "" },
    call,
  );
  const created = await h.catalog.createTable(
    { databaseId: database!.databaseId, name, description: "", fields },
    call,
  );
  return {
    databaseId: database!.databaseId,
    tableId: created.table!.tableId,
    fields: created.fields,
    id: Object.fromEntries(created.fields.map((f) => [f.name, f.fieldId.toString()])),
  };
}

/** Retries `check` until it passes (events are applied asynchronously); rethrows its last failure. */
export async function eventually<T>(check: () => Promise<T> | T, timeout = 10_000): Promise<T> {
  const deadline = Date.now() + timeout;
  for (;;) {
    try {
      return await check();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

/** The messages of an upload (FilesService.UploadFile): the header, then the bytes in chunks. */
export async function* uploadMessages(
  header: { rowId: bigint; fieldId: bigint; fileName: string },
  content: string,
  chunkSize = 16 * 1024,
): AsyncGenerator<UploadFileRequest> {
  const bytes = Buffer.from(content, "utf8");
  yield {
    $typeName: "rowbase.files.v1.UploadFileRequest",
    payload: {
      case: "header",
      value: { $typeName: "rowbase.files.v1.UploadFileHeader", ...header, declaredSize: 0n },
    },
  };
  for (let offset = 0; offset < bytes.length; offset += chunkSize) {
    yield {
      $typeName: "rowbase.files.v1.UploadFileRequest",
      payload: { case: "chunk", value: bytes.subarray(offset, offset + chunkSize) },
    };
  }
}
