import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { JsonObject } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import { catalogEnv, migrateCatalog, type RunningCatalog, startCatalog } from "@rowbase/catalog";
import { filesEnv, migrateFiles, startFiles } from "@rowbase/files";
import { generateSigningKey, identityEnv, migrateIdentity, startIdentity } from "@rowbase/identity";
import {
  type BusMessage,
  createLogger,
  createServiceClient,
  freePort,
  type Logger,
  NatsBus,
  type Principal,
  RedisCache,
  STREAMS,
} from "@rowbase/kit";
import {
  createTestDatabase,
  eventsOf,
  failureOf,
  type MailCatcher,
  reasonOf,
  signedAs,
  startMailCatcher,
  testInfra,
  uniqueName,
  validationOf,
} from "@rowbase/kit/testing";
import { migrateOrganization, organizationEnv, startOrganization } from "@rowbase/organization";
import { type Field, FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import {
  FilesService,
  type UploadFileRequest,
} from "@rowbase/proto/rowbase/files/v1/files_service_pb";
import { IdentityService } from "@rowbase/proto/rowbase/identity/v1/identity_service_pb";
import { PlanName, Role } from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { RecordsService } from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import pg from "pg";
import { expect } from "vitest";
import { migrateRecords, type RunningRecords, recordsEnv, startRecords } from "../src/index.js";
import { type JsonRecordsClient, jsonRecordsClient } from "./json-records-client.js";

export const SECRET = "test-internal-secret-of-at-least-32-chars";

/** Call options carrying a signed principal, as the gateway sends them. */
export const as = (who: TestUser | Principal) => signedAs(SECRET, who);

export { eventsOf, failureOf, reasonOf, validationOf };

export interface TestUser {
  id: bigint;
  email: string;
  name: string;
}

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

export interface Harness {
  /** The records service, with record values as objects (see json-records-client.ts). */
  records: JsonRecordsClient;
  files: Client<typeof FilesService>;
  catalog: Client<typeof CatalogService>;
  org: Client<typeof OrganizationService>;
  /** Direct connections to the test database (schema-qualified queries). */
  db: pg.Pool;
  databaseUrl: string;
  cache: RedisCache;
  bus: NatsBus;
  logger: Logger;
  /** Every message published on the CATALOG, ORG, AUDIT and RECORDS streams since the start. */
  events: BusMessage[];
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
 * database (of `databaseLocale` when given, else of the server's default), Redis under a unique
 * prefix, NATS under a unique namespace, a mail catcher for codes and the files' bytes in a
 * temporary directory. Organization asks records and files for usage, catalog asks records
 * about type changes and records asks files for file fields, as deployed.
 */
export async function startHarness(options: { databaseLocale?: string } = {}): Promise<Harness> {
  const infra = await testInfra();
  const database = await createTestDatabase(
    infra.databaseUrl,
    options.databaseLocale ? { locale: options.databaseLocale } : {},
  );
  const mail: MailCatcher = await startMailCatcher();
  const logger = createLogger("records-test", process.env.TEST_LOG_LEVEL ?? "silent");
  const cache = RedisCache.connect(infra.redisUrl, `${uniqueName("rec")}:`);
  const namespace = uniqueName("rec");
  const bus = await NatsBus.connect(infra.natsUrl, logger, namespace);
  const recordsPort = await freePort();
  const recordsUrl = `http://127.0.0.1:${recordsPort}`;
  const filesPort = await freePort();
  const filesUrl = `http://127.0.0.1:${filesPort}`;
  const filesDir = await mkdtemp(path.join(os.tmpdir(), "rowbase-records-it-"));

  await migrateIdentity(database.url);
  const identity = await startIdentity(
    identityEnv.parse({
      DATABASE_URL: database.url,
      INTERNAL_JWT_SECRET: SECRET,
      GRPC_HOST: "127.0.0.1",
      GRPC_PORT: "0",
      SMTP_URL: mail.url,
      JWT_SIGNING_KEYS: JSON.stringify([await generateSigningKey()]),
    }),
    { logger, cache },
  );
  const identityUrl = `http://127.0.0.1:${identity.server.port}`;
  const identityClient = createServiceClient(IdentityService, identityUrl);

  await migrateOrganization(database.url);
  const organization = await startOrganization(
    organizationEnv.parse({
      DATABASE_URL: database.url,
      INTERNAL_JWT_SECRET: SECRET,
      GRPC_HOST: "127.0.0.1",
      GRPC_PORT: "0",
      IDENTITY_GRPC_URL: identityUrl,
      SMTP_URL: mail.url,
      RECORDS_GRPC_URL: recordsUrl,
      FILES_GRPC_URL: filesUrl,
    }),
    { logger, cache, bus },
  );
  const organizationUrl = `http://127.0.0.1:${organization.server.port}`;

  await migrateCatalog(database.url);
  const catalogConfigOf = (extra: Record<string, string>) =>
    catalogEnv.parse({
      DATABASE_URL: database.url,
      INTERNAL_JWT_SECRET: SECRET,
      GRPC_HOST: "127.0.0.1",
      GRPC_PORT: "0",
      ORGANIZATION_GRPC_URL: organizationUrl,
      RECORDS_GRPC_URL: recordsUrl,
      ...extra,
    });
  const catalog = await startCatalog(catalogConfigOf({}), { logger, cache, bus });
  const catalogReplicas: RunningCatalog[] = [];
  const catalogUrl = `http://127.0.0.1:${catalog.server.port}`;

  expect(await migrateRecords(database.url)).toEqual([
    "InitialSchema",
    "CreateGate",
    "CreateGateAutonumbers",
    "WriteGate",
    "PendingWrites",
    "RequiredMarks",
    "ChangeIds",
    "IcuCollation",
  ]);
  expect(await migrateRecords(database.url)).toEqual([]);
  const recordsConfigOf = (extra: Record<string, string>) =>
    recordsEnv.parse({
      DATABASE_URL: database.url,
      INTERNAL_JWT_SECRET: SECRET,
      GRPC_HOST: "127.0.0.1",
      GRPC_PORT: "0",
      ORGANIZATION_GRPC_URL: organizationUrl,
      CATALOG_GRPC_URL: catalogUrl,
      FILES_GRPC_URL: filesUrl,
      ...extra,
    });
  const records: RunningRecords = await startRecords(
    recordsConfigOf({ GRPC_PORT: String(recordsPort) }),
    { logger, cache, bus },
  );
  const replicas: RunningRecords[] = [];

  await migrateFiles(database.url);
  const files = await startFiles(
    filesEnv.parse({
      DATABASE_URL: database.url,
      INTERNAL_JWT_SECRET: SECRET,
      GRPC_HOST: "127.0.0.1",
      GRPC_PORT: String(filesPort),
      ORGANIZATION_GRPC_URL: organizationUrl,
      CATALOG_GRPC_URL: catalogUrl,
      RECORDS_GRPC_URL: recordsUrl,
      FILES_DIR: filesDir,
      FILE_URL_SECRET: "test-file-url-secret-of-at-least-32-chars",
    }),
    { logger, cache, bus },
  );

  const events: BusMessage[] = [];
  const consumers = await Promise.all(
    ["CATALOG", "ORG", "AUDIT", "RECORDS"].map((stream) =>
      bus.consume(
        { stream, durable: `test_${stream.toLowerCase()}`, subject: `${stream.toLowerCase()}.>` },
        async (message) => {
          events.push(message);
        },
      ),
    ),
  );

  const db = new pg.Pool({ connectionString: database.url, max: 4 });

  return {
    records: jsonRecordsClient(createServiceClient(RecordsService, recordsUrl)),
    files: createServiceClient(FilesService, filesUrl),
    catalog: createServiceClient(CatalogService, catalogUrl),
    org: createServiceClient(OrganizationService, organizationUrl),
    db,
    databaseUrl: database.url,
    cache,
    bus,
    logger,
    events,
    async user(name = "Ada") {
      counter += 1;
      const email = `user${counter}.${uniqueName("r")}@example.test`;
      const before = mail.messages.length;
      await identityClient.register({ email, password: "correct horse battery", name });
      const message = await mail.next(email, before);
      const code = /code: (\d{6})/.exec(message.subject)![1]!;
      await identityClient.verifyEmail({ email, code });
      const { rows } = await db.query("select id from identity.users where email = $1", [email]);
      return { id: BigInt(rows[0].id), email, name };
    },
    async replica(env = {}) {
      const replica = await startRecords(recordsConfigOf(env), { logger, cache, bus });
      replicas.push(replica);
      return {
        records: jsonRecordsClient(
          createServiceClient(RecordsService, `http://127.0.0.1:${replica.server.port}`),
        ),
        async stop() {
          replicas.splice(replicas.indexOf(replica), 1);
          await replica.stop();
        },
      };
    },
    async catalogReplica(env = {}) {
      const replica = await startCatalog(catalogConfigOf(env), { logger, cache, bus });
      catalogReplicas.push(replica);
      return {
        catalog: createServiceClient(CatalogService, `http://127.0.0.1:${replica.server.port}`),
        async stop() {
          catalogReplicas.splice(catalogReplicas.indexOf(replica), 1);
          await replica.stop();
        },
      };
    },
    async stop() {
      for (const consumer of consumers) await consumer.stop();
      await db.end();
      for (const replica of replicas) await replica.stop();
      for (const replica of catalogReplicas) await replica.stop();
      await files.stop();
      await records.stop();
      await catalog.stop();
      await organization.stop();
      await identity.stop();
      await bus.deleteStreams(STREAMS.map((s) => s.name));
      await bus.close();
      await cache.close();
      await mail.close();
      await rm(filesDir, { recursive: true, force: true });
      await database.drop();
    },
  };
}

export interface Team {
  organizationId: bigint;
  owner: TestUser;
  editor: TestUser;
  viewer: TestUser;
  /** A user who owns another organization. */
  outsider: TestUser;
  outsiderOrganizationId: bigint;
}

/** An organization on the plus plan with an editor and a viewer, and an outsider elsewhere. */
export async function team(h: Harness): Promise<Team> {
  const [owner, editor, viewer, outsider] = await Promise.all([
    h.user("Owner"),
    h.user("Editor"),
    h.user("Viewer"),
    h.user("Outsider"),
  ]);
  const { organization } = await h.org.createOrganization(
    { name: "Team", organizationSlug: "" },
    await as(owner),
  );
  const organizationId = organization!.organizationId;
  await h.org.setPlan({ organizationId, plan: PlanName.PLUS }, await as(OPERATOR));
  for (const [user, role] of [
    [editor, Role.EDITOR],
    [viewer, Role.VIEWER],
  ] as const) {
    const { invite } = await h.org.createInvite(
      { organizationId, email: user.email, role },
      await as(owner),
    );
    await h.org.acceptInvite({ inviteId: invite!.inviteId }, await as(user));
  }
  const other = await h.org.createOrganization(
    { name: "Elsewhere", organizationSlug: "" },
    await as(outsider),
  );
  return {
    organizationId,
    owner,
    editor,
    viewer,
    outsider,
    outsiderOrganizationId: other.organization!.organizationId,
  };
}

/** A field definition for CreateTable. */
export function def(
  name: string,
  type: FieldType,
  options?: JsonObject,
  required = false,
): { name: string; type: FieldType; options?: JsonObject; required: boolean; description: string } {
  return { name, type, ...(options ? { options } : {}), required, description: "" };
}

/** One field of every type (SPEC section 6). */
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
