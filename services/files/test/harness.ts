import { mkdtemp, readdir, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { create, type JsonObject } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import { catalogEnv, migrateCatalog, startCatalog } from "@rowbase/catalog";
import { generateSigningKey, identityEnv, migrateIdentity, startIdentity } from "@rowbase/identity";
import {
  type BusMessage,
  createLogger,
  createServiceClient,
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
import { FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import type { ByteRange, FileServeHeader } from "@rowbase/proto/rowbase/files/v1/files_pb";
import {
  FilesService,
  type UploadFileRequest,
} from "@rowbase/proto/rowbase/files/v1/files_service_pb";
import { IdentityService } from "@rowbase/proto/rowbase/identity/v1/identity_service_pb";
import {
  PlanLimitsSchema,
  PlanName,
  Role,
} from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { RecordsService } from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import { migrateRecords, recordsEnv, startRecords } from "@rowbase/records";
import pg from "pg";
import { expect } from "vitest";
import { filesEnv, migrateFiles, type RunningFiles, startFiles } from "../src/index.js";
import { type S3Server, startS3Server } from "./s3-server.js";

export const SECRET = "test-internal-secret-of-at-least-32-chars";

/** Call options carrying a signed principal, as the gateway sends them. */
export const as = (who: TestUser | Principal) => signedAs(SECRET, who);

export { eventsOf, failureOf, reasonOf, validationOf };
export const URL_SECRET = "test-file-url-secret-of-at-least-32-chars";

export type Backend = "directory" | "s3";

export interface TestUser {
  id: bigint;
  email: string;
  name: string;
}

/** One more files process on the same database, cache and bus: another replica. */
export interface Replica {
  files: Client<typeof FilesService>;
  stop(): Promise<void>;
}

export interface Harness {
  backend: Backend;
  files: Client<typeof FilesService>;
  records: Client<typeof RecordsService>;
  catalog: Client<typeof CatalogService>;
  org: Client<typeof OrganizationService>;
  running: RunningFiles;
  /** Direct connections to the test database (schema-qualified queries). */
  db: pg.Pool;
  cache: RedisCache;
  bus: NatsBus;
  logger: Logger;
  /** Every message published on the CATALOG, ORG, AUDIT and RECORDS streams since the start. */
  events: BusMessage[];
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
  const infra = await testInfra();
  const database = await createTestDatabase(infra.databaseUrl);
  const mail: MailCatcher = await startMailCatcher();
  const logger = createLogger("files-test", process.env.TEST_LOG_LEVEL ?? "silent");
  const cache = RedisCache.connect(infra.redisUrl, `${uniqueName("fil")}:`);
  const namespace = uniqueName("fil");
  const bus = await NatsBus.connect(infra.natsUrl, logger, namespace);
  const filesDir = await mkdtemp(path.join(os.tmpdir(), "rowbase-files-it-"));
  const s3: S3Server | undefined = backend === "s3" ? await startS3Server() : undefined;

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
    }),
    { logger, cache, bus },
  );
  const organizationUrl = `http://127.0.0.1:${organization.server.port}`;

  await migrateCatalog(database.url);
  const catalog = await startCatalog(
    catalogEnv.parse({
      DATABASE_URL: database.url,
      INTERNAL_JWT_SECRET: SECRET,
      GRPC_HOST: "127.0.0.1",
      GRPC_PORT: "0",
      ORGANIZATION_GRPC_URL: organizationUrl,
    }),
    { logger, cache, bus },
  );
  const catalogUrl = `http://127.0.0.1:${catalog.server.port}`;

  await migrateRecords(database.url);
  const records = await startRecords(
    recordsEnv.parse({
      DATABASE_URL: database.url,
      INTERNAL_JWT_SECRET: SECRET,
      GRPC_HOST: "127.0.0.1",
      GRPC_PORT: "0",
      ORGANIZATION_GRPC_URL: organizationUrl,
      CATALOG_GRPC_URL: catalogUrl,
    }),
    { logger, cache, bus },
  );
  const recordsUrl = `http://127.0.0.1:${records.server.port}`;

  const configOf = (extra: Record<string, string>) =>
    filesEnv.parse({
      DATABASE_URL: database.url,
      INTERNAL_JWT_SECRET: SECRET,
      GRPC_HOST: "127.0.0.1",
      GRPC_PORT: "0",
      ORGANIZATION_GRPC_URL: organizationUrl,
      CATALOG_GRPC_URL: catalogUrl,
      RECORDS_GRPC_URL: recordsUrl,
      FILES_DIR: filesDir,
      FILE_URL_SECRET: URL_SECRET,
      ...(s3?.env ?? {}),
      ...extra,
    });
  expect(await migrateFiles(database.url)).toEqual(["InitialSchema", "ProcessedEvents"]);
  expect(await migrateFiles(database.url)).toEqual([]);
  const running = await startFiles(configOf({}), { logger, cache, bus });
  expect(running.blobs.kind).toBe(backend);

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
  const replicas: RunningFiles[] = [];

  const db = new pg.Pool({ connectionString: database.url, max: 4 });

  return {
    backend,
    files: createServiceClient(FilesService, `http://127.0.0.1:${running.server.port}`),
    records: createServiceClient(RecordsService, recordsUrl),
    catalog: createServiceClient(CatalogService, catalogUrl),
    org: createServiceClient(OrganizationService, organizationUrl),
    running,
    db,
    cache,
    bus,
    logger,
    events,
    async storedKeys() {
      if (s3) {
        const objects = await filesUnder(path.join(s3.directory, s3.env.S3_BUCKET));
        return new Set(
          objects
            .filter((f) => f.endsWith("._S3rver_object"))
            .map((f) => path.basename(f, "._S3rver_object")),
        );
      }
      const stored = await filesUnder(filesDir);
      return new Set(
        stored
          .filter((f) => !f.includes(`${path.sep}.partial${path.sep}`))
          .map((f) => path.basename(f)),
      );
    },
    async user(name = "Ada") {
      counter += 1;
      const email = `user${counter}.${uniqueName("f")}@example.test`;
      const before = mail.messages.length;
      await identityClient.register({ email, password: "correct horse battery", name });
      const message = await mail.next(email, before);
      const code = /code: (\d{6})/.exec(message.subject)![1]!;
      await identityClient.verifyEmail({ email, code });
      const { rows } = await db.query("select id from identity.users where email = $1", [email]);
      return { id: BigInt(rows[0].id), email, name };
    },
    async replica(env = {}) {
      const replica = await startFiles(configOf(env), { logger, cache, bus });
      replicas.push(replica);
      return {
        files: createServiceClient(FilesService, `http://127.0.0.1:${replica.server.port}`),
        async stop() {
          replicas.splice(replicas.indexOf(replica), 1);
          await replica.stop();
        },
      };
    },
    async stop() {
      for (const consumer of consumers) await consumer.stop();
      await db.end();
      for (const replica of replicas) await replica.stop();
      await running.stop();
      await records.stop();
      await catalog.stop();
      await organization.stop();
      await identity.stop();
      await bus.deleteStreams(STREAMS.map((s) => s.name));
      await bus.close();
      await cache.close();
      await mail.close();
      await s3?.close();
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
export async function team(h: Harness, limits?: typeof SMALL_LIMITS): Promise<Team> {
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
  await h.org.setPlan(
    limits
      ? {
          organizationId,
          plan: PlanName.ENTERPRISE,
          enterpriseLimits: create(PlanLimitsSchema, limits),
        }
      : { organizationId, plan: PlanName.PLUS },
    await as(OPERATOR),
  );
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
