import type { Client } from "@connectrpc/connect";
import { generateSigningKey, identityEnv, migrateIdentity, startIdentity } from "@rowbase/identity";
import {
  type BusMessage,
  createLogger,
  createServiceClient,
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
import { IdentityService } from "@rowbase/proto/rowbase/identity/v1/identity_service_pb";
import { PlanName, Role } from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import pg from "pg";
import { expect } from "vitest";
import {
  migrateOrganization,
  type OrganizationConfig,
  organizationEnv,
  type RunningOrganization,
  startOrganization,
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
  org: Client<typeof OrganizationService>;
  mail: MailCatcher;
  /** Direct connections to the test database (schema-qualified queries). */
  db: pg.Pool;
  cache: RedisCache;
  config: OrganizationConfig;
  /** The running service (its audit store's retention job, for one). */
  service: RunningOrganization;
  /** The harness's own connection to NATS, under the test's namespace. */
  bus: NatsBus;
  /** Every message published on the ORG and AUDIT streams since the start. */
  events: BusMessage[];
  /** A registered user with a verified e-mail. */
  user(name?: string): Promise<TestUser>;
  /** A registered user who never verified the e-mail. */
  unverifiedUser(): Promise<TestUser>;
  stop(): Promise<void>;
}

let counter = 0;

export const SERVICE: Principal = { kind: "service", service: "gateway" };
export const OPERATOR: Principal = { kind: "operator", name: "test-operator" };

/**
 * Everything stored for an organization plus the outbox size: a refused write must leave it as
 * it was.
 */
export async function stateOf(db: pg.Pool, organizationId: bigint): Promise<unknown> {
  const id = organizationId.toString();
  const rows = async (sql: string) => (await db.query(sql, [id])).rows;
  return {
    organization: await rows("select * from organization.organizations where id = $1"),
    members: await rows(
      "select * from organization.members where organization_id = $1 order by id",
    ),
    invites: await rows(
      "select * from organization.invites where organization_id = $1 order by id",
    ),
    tokens: await rows(
      "select * from organization.api_tokens where organization_id = $1 order by id",
    ),
    transfer: await rows("select * from organization.transfer_codes where organization_id = $1"),
    outbox: (await db.query("select count(*)::int as n from organization.outbox")).rows[0].n,
  };
}

/**
 * The real identity service and the organization service against one fresh database, Redis
 * under a unique prefix, NATS under a unique namespace and a mail catcher.
 */
export async function startHarness(
  env: Record<string, string> = {},
  options: { natsUrl?: string } = {},
): Promise<Harness> {
  const infra = await testInfra();
  const database = await createTestDatabase(infra.databaseUrl);
  const mail = await startMailCatcher();
  const logger = createLogger("organization-test", process.env.TEST_LOG_LEVEL ?? "silent");
  const cache = RedisCache.connect(infra.redisUrl, `${uniqueName("org")}:`);
  const namespace = uniqueName("org");
  const bus = await NatsBus.connect(options.natsUrl ?? infra.natsUrl, logger, namespace);

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

  const config = organizationEnv.parse({
    DATABASE_URL: database.url,
    INTERNAL_JWT_SECRET: SECRET,
    GRPC_HOST: "127.0.0.1",
    GRPC_PORT: "0",
    IDENTITY_GRPC_URL: identityUrl,
    SMTP_URL: mail.url,
    ...env,
  });
  expect(await migrateOrganization(database.url)).toEqual([
    "InitialSchema",
    "AuditLogAndUsage",
    "PlanVersion",
  ]);
  const service = await startOrganization(config, { logger, cache, bus });
  const org = createServiceClient(OrganizationService, `http://127.0.0.1:${service.server.port}`);

  const events: BusMessage[] = [];
  const consumers = await Promise.all(
    ["ORG", "AUDIT"].map((stream) =>
      bus.consume(
        { stream, durable: `test_${stream.toLowerCase()}`, subject: `${stream.toLowerCase()}.>` },
        async (message) => {
          events.push(message);
        },
      ),
    ),
  );

  const db = new pg.Pool({ connectionString: database.url, max: 4 });

  async function register(name: string, verify: boolean): Promise<TestUser> {
    counter += 1;
    const email = `user${counter}.${uniqueName("o")}@example.test`;
    const before = mail.messages.length;
    await identityClient.register({ email, password: "correct horse battery", name });
    if (verify) {
      const message = await mail.next(email, before);
      const code = /code: (\d{6})/.exec(message.subject)![1]!;
      await identityClient.verifyEmail({ email, code });
    }
    const { rows } = await db.query("select id from identity.users where email = $1", [email]);
    return { id: BigInt(rows[0].id), email, name };
  }

  return {
    org,
    mail,
    db,
    cache,
    config,
    service,
    bus,
    events,
    user: (name = "Ada") => register(name, true),
    unverifiedUser: () => register("Unverified", false),
    async stop() {
      for (const consumer of consumers) await consumer.stop();
      await db.end();
      await service.stop();
      await identity.stop();
      await bus.deleteStreams(STREAMS.map((s) => s.name));
      await bus.close();
      await cache.close();
      await mail.close();
      await database.drop();
    },
  };
}

export async function newOrganization(h: Harness, owner: TestUser, name = "Acme Corp", slug = "") {
  const { organization } = await h.org.createOrganization(
    { name, organizationSlug: slug },
    await as(owner),
  );
  return organization!;
}

/** An organization on the plus plan with a member of each role, and a user outside it. */
export async function team(h: Harness) {
  const [owner, admin, editor, viewer, outsider] = await Promise.all([
    h.user("Owner"),
    h.user("Admin"),
    h.user("Editor"),
    h.user("Viewer"),
    h.user("Outsider"),
  ]);
  const organization = await newOrganization(h, owner, "Team");
  const id = organization.organizationId;
  await h.org.setPlan({ organizationId: id, plan: PlanName.PLUS }, await as(OPERATOR));
  const memberIds = new Map<TestUser, bigint>();
  for (const [user, role] of [
    [admin, Role.ADMIN],
    [editor, Role.EDITOR],
    [viewer, Role.VIEWER],
  ] as const) {
    const { invite } = await h.org.createInvite(
      { organizationId: id, email: user.email, role },
      await as(owner),
    );
    await h.org.acceptInvite({ inviteId: invite!.inviteId }, await as(user));
  }
  const { members } = await h.org.listMembers({ organizationId: id }, await as(owner));
  for (const user of [owner, admin, editor, viewer]) {
    memberIds.set(user, members.find((m) => m.userId === user.id)!.memberId);
  }
  /** The member id of a user of the team. */
  const memberOf = (user: TestUser) => memberIds.get(user)!;
  return { organization, id, owner, admin, editor, viewer, outsider, memberOf };
}
