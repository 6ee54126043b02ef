import type { DescMessage, MessageShape } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
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
import { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import { IdentityService } from "@rowbase/proto/rowbase/identity/v1/identity_service_pb";
import { PlanName, Role } from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import pg from "pg";
import { expect } from "vitest";
import {
  type CatalogConfig,
  catalogEnv,
  migrateCatalog,
  type RunningCatalog,
  startCatalog,
} from "../src/index.js";

export const SECRET = "test-internal-secret-of-at-least-32-chars";

/** Call options carrying a signed principal, as the gateway sends them. */
export const as = (who: TestUser | Principal) => signedAs(SECRET, who);

export { eventsOf, failureOf, reasonOf, validationOf };

export interface TestUser {
  id: bigint;
  email: string;
  name: string;
}

export interface Harness {
  catalog: Client<typeof CatalogService>;
  org: Client<typeof OrganizationService>;
  /** Direct connections to the test database (schema-qualified queries). */
  db: pg.Pool;
  cache: RedisCache;
  bus: NatsBus;
  logger: Logger;
  config: CatalogConfig;
  /** Every message published on the CATALOG, ORG and AUDIT streams since the start. */
  events: BusMessage[];
  /** A registered user with a verified e-mail. */
  user(name?: string): Promise<TestUser>;
  /** Stops the catalog service and starts it again with extra environment. */
  restartCatalog(env?: Record<string, string>): Promise<void>;
  stop(): Promise<void>;
}

let counter = 0;

/** Another Rowbase service, as records and files call catalog. */
export const SERVICE: Principal = { kind: "service", service: "records" };

/** The `{key, message}` list of an invalid_field_options error. */
export async function optionErrorsOf(
  call: Promise<unknown>,
): Promise<{ key: string; message: string }[]> {
  const failure = await failureOf(call);
  expect(failure.reason).toBe("invalid_field_options");
  expect(failure.code).toBe(3); // InvalidArgument
  return JSON.parse(failure.metadata.errors ?? "[]");
}

/** Waits until a matching event of `subject` arrived, and returns it. */
export async function eventOf<D extends DescMessage>(
  h: Harness,
  subject: string,
  schema: D,
  matches: (event: MessageShape<D>) => boolean,
): Promise<MessageShape<D>> {
  await expect.poll(() => eventsOf(h.events, subject, schema).some(matches)).toBe(true);
  return eventsOf(h.events, subject, schema).find(matches)!;
}

/** Everything catalog stores for an organization plus the outbox size. */
export async function stateOf(db: pg.Pool, organizationId: bigint): Promise<unknown> {
  const id = organizationId.toString();
  const rows = async (sql: string) => (await db.query(sql, [id])).rows;
  return {
    databases: await rows("select * from catalog.databases where organization_id = $1 order by id"),
    tables: await rows(
      `select t.* from catalog.tables t join catalog.databases d on d.id = t.database_id
       where d.organization_id = $1 order by t.id`,
    ),
    fields: await rows(
      `select f.* from catalog.fields f join catalog.tables t on t.id = f.table_id
       join catalog.databases d on d.id = t.database_id
       where d.organization_id = $1 order by f.id`,
    ),
    outbox: (await db.query("select count(*)::int as n from catalog.outbox")).rows[0].n,
  };
}

/**
 * The real identity, organization and catalog services against one fresh database, Redis under
 * a unique prefix, NATS under a unique namespace and a mail catcher for verification codes.
 */
export async function startHarness(env: Record<string, string> = {}): Promise<Harness> {
  const infra = await testInfra();
  const database = await createTestDatabase(infra.databaseUrl);
  const mail: MailCatcher = await startMailCatcher();
  const logger = createLogger("catalog-test", process.env.TEST_LOG_LEVEL ?? "silent");
  const cache = RedisCache.connect(infra.redisUrl, `${uniqueName("cat")}:`);
  const namespace = uniqueName("cat");
  const bus = await NatsBus.connect(infra.natsUrl, logger, namespace);

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

  const configOf = (extra: Record<string, string>) =>
    catalogEnv.parse({
      DATABASE_URL: database.url,
      INTERNAL_JWT_SECRET: SECRET,
      GRPC_HOST: "127.0.0.1",
      GRPC_PORT: "0",
      ORGANIZATION_GRPC_URL: organizationUrl,
      ...env,
      ...extra,
    });
  expect(await migrateCatalog(database.url)).toEqual([
    "InitialSchema",
    "ProcessedEvents",
    "NameKeys",
    "SchemaVersion",
  ]);
  expect(await migrateCatalog(database.url)).toEqual([]);
  let config = configOf({});
  let service: RunningCatalog = await startCatalog(config, { logger, cache, bus });

  const events: BusMessage[] = [];
  const consumers = await Promise.all(
    ["CATALOG", "ORG", "AUDIT"].map((stream) =>
      bus.consume(
        { stream, durable: `test_${stream.toLowerCase()}`, subject: `${stream.toLowerCase()}.>` },
        async (message) => {
          events.push(message);
        },
      ),
    ),
  );

  const db = new pg.Pool({ connectionString: database.url, max: 4 });

  const harness: Harness = {
    catalog: createServiceClient(CatalogService, `http://127.0.0.1:${service.server.port}`),
    org: createServiceClient(OrganizationService, organizationUrl),
    db,
    cache,
    bus,
    logger,
    config,
    events,
    async user(name = "Ada") {
      counter += 1;
      const email = `user${counter}.${uniqueName("c")}@example.test`;
      const before = mail.messages.length;
      await identityClient.register({ email, password: "correct horse battery", name });
      const message = await mail.next(email, before);
      const code = /code: (\d{6})/.exec(message.subject)![1]!;
      await identityClient.verifyEmail({ email, code });
      const { rows } = await db.query("select id from identity.users where email = $1", [email]);
      return { id: BigInt(rows[0].id), email, name };
    },
    async restartCatalog(extra = {}) {
      await service.stop();
      config = configOf(extra);
      service = await startCatalog(config, { logger, cache, bus });
      harness.config = config;
      harness.catalog = createServiceClient(
        CatalogService,
        `http://127.0.0.1:${service.server.port}`,
      );
    },
    async stop() {
      for (const consumer of consumers) await consumer.stop();
      await db.end();
      await service.stop();
      await organization.stop();
      await identity.stop();
      await bus.deleteStreams(STREAMS.map((s) => s.name));
      await bus.close();
      await cache.close();
      await mail.close();
      await database.drop();
    },
  };
  return harness;
}

export interface Team {
  organizationId: bigint;
  owner: TestUser;
  admin: TestUser;
  editor: TestUser;
  viewer: TestUser;
  /** A user of another organization. */
  outsider: TestUser;
  outsiderOrganizationId: bigint;
}

/**
 * An organization on the plus plan with a member of each role, and an outsider who owns an
 * organization of their own.
 */
export async function team(h: Harness): Promise<Team> {
  const [owner, admin, editor, viewer, outsider] = await Promise.all([
    h.user("Owner"),
    h.user("Admin"),
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
    { organizationId, plan: PlanName.PLUS },
    await as({ kind: "operator", name: "test" }),
  );
  for (const [user, role] of [
    [admin, Role.ADMIN],
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
    admin,
    editor,
    viewer,
    outsider,
    outsiderOrganizationId: other.organization!.organizationId,
  };
}
