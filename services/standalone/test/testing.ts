import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Client } from "@connectrpc/connect";
import { generateSigningKey } from "@rowbase/identity";
import { createLogger, createServiceClient, freePort, type LogDestination } from "@rowbase/kit";
import {
  as,
  type ServedService,
  startTestStack,
  type TestStack,
  uniqueName,
} from "@rowbase/kit/testing";
import { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import { FilesService } from "@rowbase/proto/rowbase/files/v1/files_service_pb";
import { IdentityService } from "@rowbase/proto/rowbase/identity/v1/identity_service_pb";
import {
  type PlanLimits,
  PlanName,
  Role,
} from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { RecordsService } from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import { WebhooksService } from "@rowbase/proto/rowbase/webhooks/v1/webhooks_service_pb";
import {
  grpcUrlsOf,
  type RunningServices,
  SERVICE_NAMES,
  SERVICES,
  type ServiceConfigs,
  type ServiceName,
} from "../src/services.js";
import { type RunningSystem, startSystem } from "../src/system.js";

export { type S3Server, startS3Server } from "./s3-server.js";

/** The secret the files service of a test signs its download URLs with. */
const TEST_FILE_URL_SECRET = "test-file-url-secret-of-at-least-32-chars";

const DESCRIPTORS = {
  identity: IdentityService,
  organization: OrganizationService,
  catalog: CatalogService,
  records: RecordsService,
  files: FilesService,
  webhooks: WebhooksService,
};

/** One instance of a service started by a test. */
export type TestService<K extends ServiceName> = ServedService<
  ServiceConfigs[K],
  RunningServices[K]
>;

export interface TestUser {
  id: bigint;
  email: string;
  name: string;
}

/** The real services of a service's integration tests, on one test stack. */
export interface TestServices {
  stack: TestStack;
  /** What each service's migrations applied to the fresh database. */
  migrated: Partial<Record<ServiceName, string[]>>;
  /** Where the files service keeps bytes: a directory of this run's own, removed at `stop`. */
  filesDir: string;
  /** The first instance of a started service; throws for one that was not started. */
  service<K extends ServiceName>(name: K): TestService<K>;
  /** A client of the first instance of a started service. */
  client<K extends ServiceName>(name: K): Client<(typeof DESCRIPTORS)[K]>;
  /**
   * Starts one more instance of a started service on the same database, cache and bus, wired
   * to the others as the first one is, with `env` over its environment: a replica, or one
   * pointed somewhere else. It stops with the rest unless stopped before.
   */
  replica<K extends ServiceName>(name: K, env?: Record<string, string>): Promise<TestService<K>>;
  /** A newly registered user, its e-mail verified with the mailed code unless `verified` is false. */
  user(name?: string, options?: { verified?: boolean }): Promise<TestUser>;
  stop(): Promise<void>;
}

export interface TestServicesOptions {
  /** The last service to start: every one before it in `SERVICE_NAMES` starts too. */
  through: ServiceName;
  /** Environment of each service over what the harness gives it. */
  env?: Partial<Record<ServiceName, Record<string, string>>>;
  /** The streams (CATALOG, ORG...) whose messages the stack collects into its `events`. */
  record?: string[];
  /** The locale of the test database (see `startTestStack`). */
  databaseLocale?: string;
  /** A NATS server of the test's own instead of the shared one. */
  natsUrl?: string;
}

/** A directory of the stack's own, removed when it stops. */
async function temporaryDirectory(stack: TestStack, prefix: string): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), prefix));
  stack.onStop(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** What a test gives the services besides its stack and where the others answer. */
interface ServeOptions {
  jwtSigningKeys: string;
  filesDir: string;
  fileUrlSecret: string;
  /** Environment of every service. */
  common?: Record<string, string>;
  /** Environment of each service, over the rest. */
  env?: Partial<Record<ServiceName, Record<string, string>>>;
}

/**
 * Starts an instance of a service on `stack` (stopped with it), pointed at the services of
 * `urls`, with `env` over its environment.
 */
function serveOn(stack: TestStack, urls: Partial<Record<ServiceName, string>>, o: ServeOptions) {
  const own: Record<ServiceName, Record<string, string>> = {
    identity: { SMTP_URL: stack.mail.url, JWT_SIGNING_KEYS: o.jwtSigningKeys },
    organization: { SMTP_URL: stack.mail.url },
    catalog: {},
    records: {},
    files: { FILES_DIR: o.filesDir, FILE_URL_SECRET: o.fileUrlSecret },
    webhooks: {},
  };
  return <K extends ServiceName>(name: K, env: Record<string, string> = {}) =>
    stack.serve(SERVICES[name].env, SERVICES[name].start, {
      ...o.common,
      ...own[name],
      ...grpcUrlsOf(name, urls),
      ...o.env?.[name],
      ...env,
    });
}

let users = 0;

/**
 * The real services from identity up to `through`, against a fresh database, Redis under a
 * unique prefix, NATS under a unique namespace and a mail catcher. Each one's gRPC port is
 * settled before any starts, and each is pointed at those of the others that run, as deployed;
 * one that does not run is left unset, which its callers take as "not deployed yet".
 */
export async function startTestServices(options: TestServicesOptions): Promise<TestServices> {
  const stack = await startTestStack(options.through, {
    ...(options.databaseLocale ? { databaseLocale: options.databaseLocale } : {}),
    ...(options.natsUrl ? { natsUrl: options.natsUrl } : {}),
  });
  const names = SERVICE_NAMES.slice(0, SERVICE_NAMES.indexOf(options.through) + 1);
  const ports: Partial<Record<ServiceName, number>> = {};
  const urls: Partial<Record<ServiceName, string>> = {};
  for (const name of names) {
    ports[name] = await freePort();
    urls[name] = `http://127.0.0.1:${ports[name]}`;
  }
  const filesDir = await temporaryDirectory(stack, "rowbase-files-it-");
  const serve = serveOn(stack, urls, {
    jwtSigningKeys: JSON.stringify([await generateSigningKey()]),
    filesDir,
    fileUrlSecret: TEST_FILE_URL_SECRET,
    ...(options.env ? { env: options.env } : {}),
  });

  const migrated: Partial<Record<ServiceName, string[]>> = {};
  for (const name of names) migrated[name] = await SERVICES[name].migrate(stack.databaseUrl);
  const served = new Map<ServiceName, TestService<ServiceName>>();
  for (const name of names) served.set(name, await serve(name, { GRPC_PORT: String(ports[name]) }));
  if (options.record) await stack.record(options.record);

  const service = <K extends ServiceName>(name: K): TestService<K> => {
    const found = served.get(name);
    if (!found) throw new Error(`the ${name} service was not started`);
    return found as TestService<K>;
  };
  const identity = createServiceClient(IdentityService, service("identity").url);
  return {
    stack,
    migrated,
    filesDir,
    service,
    client: (name) => createServiceClient(DESCRIPTORS[name], service(name).url),
    replica(name, env = {}) {
      service(name);
      return serve(name, env);
    },
    async user(name = "Ada", { verified = true } = {}) {
      users += 1;
      const email = `user${users}.${uniqueName("u")}@example.test`;
      const before = stack.mail.messages.length;
      await identity.register({ email, password: "correct horse battery", name });
      if (verified) {
        const message = await stack.mail.next(email, before);
        const code = /code: (\d{6})/.exec(message.subject)![1]!;
        await identity.verifyEmail({ email, code });
      }
      const { rows } = await stack.db.query("select id from identity.users where email = $1", [
        email,
      ]);
      return { id: BigInt(rows[0].id), email, name };
    },
    stop: () => stack.stop(),
  };
}

/** The roles a test team's members have, by the name a test calls each member. */
const MEMBER_ROLES = { admin: Role.ADMIN, editor: Role.EDITOR, viewer: Role.VIEWER } as const;

export type TestMember = keyof typeof MEMBER_ROLES;

/** An organization with its owner and members, and a user of another organization. */
export type TestTeam<M extends TestMember> = {
  organizationId: bigint;
  owner: TestUser;
  /** A user who owns another organization. */
  outsider: TestUser;
  outsiderOrganizationId: bigint;
} & Record<M, TestUser>;

/**
 * A new organization "Team" on `plan` (PLUS unless given), its owner, a member of each of
 * `members`' roles, and an outsider who owns an organization "Elsewhere"; `user` registers each.
 */
export async function createTestTeam<M extends TestMember>(
  org: Client<typeof OrganizationService>,
  user: (name: string) => Promise<TestUser>,
  members: readonly M[],
  plan: { plan: PlanName; enterpriseLimits?: PlanLimits } = { plan: PlanName.PLUS },
): Promise<TestTeam<M>> {
  const title = (name: string) => `${name[0]!.toUpperCase()}${name.slice(1)}`;
  const people = await Promise.all(["owner", ...members, "outsider"].map((n) => user(title(n))));
  const owner = people[0]!;
  const outsider = people.at(-1)!;
  const { organization } = await org.createOrganization(
    { name: "Team", organizationSlug: "" },
    await as(owner),
  );
  const organizationId = organization!.organizationId;
  await org.setPlan({ ...plan, organizationId }, await as({ kind: "operator", name: "test" }));
  const named = {} as Record<M, TestUser>;
  for (const [index, member] of members.entries()) {
    const invited = people[index + 1]!;
    const { invite } = await org.createInvite(
      { organizationId, email: invited.email, role: MEMBER_ROLES[member] },
      await as(owner),
    );
    await org.acceptInvite({ inviteId: invite!.inviteId }, await as(invited));
    named[member] = invited;
  }
  const other = await org.createOrganization(
    { name: "Elsewhere", organizationSlug: "" },
    await as(outsider),
  );
  return {
    organizationId,
    owner,
    outsider,
    outsiderOrganizationId: other.organization!.organizationId,
    ...named,
  };
}

/** The whole of Rowbase started by an end-to-end test, and what it was started with. */
export interface TestSystem {
  baseUrl: string;
  mail: TestStack["mail"];
  system: RunningSystem;
  /** The private signing keys the identity service uses (to forge or expire tokens in tests). */
  signingKeys: Awaited<ReturnType<typeof generateSigningKey>>[];
  /**
   * Starts one more instance of a service beside the system, on the same database, Redis prefix
   * and NATS namespace, pointed at the system's services, with `env` over its environment. It
   * stops with the system unless stopped before.
   */
  replica<K extends ServiceName>(name: K, env?: Record<string, string>): Promise<TestService<K>>;
  databaseUrl: string;
  /** The system's NATS, and the namespace of its streams (`<namespace>_<stream>`). */
  natsUrl: string;
  namespace: string;
  internalJwtSecret: string;
  /**
   * Where the files service keeps bytes: FILES_DIR when the test sets it, else a directory of
   * this system's own, removed at `stop`.
   */
  filesDir: string;
  stop(): Promise<void>;
}

/** Permissive limits for tests that are not about rate limiting. */
export const RELAXED_RATE_LIMITS = [
  "auth_login_ip=10000/60",
  "auth_login_email=10000/60",
  "auth_register_ip=10000/60",
  "auth_resend_ip=10000/60",
  "auth_verify_ip=10000/60",
  "auth_refresh_ip=10000/60",
].join(",");

/**
 * The whole of Rowbase (`startSystem`) on free ports, on a test stack: a fresh database, Redis
 * under the stack's key prefix, NATS under its namespace, and the stack's mail catcher. With
 * `logs`, every process writes its log lines there, at info level.
 */
export async function startTestSystem(
  env: Record<string, string> = {},
  options: {
    logs?: LogDestination;
    /** A NATS server of the test's own (one it stops) instead of the shared one. */
    natsUrl?: string;
  } = {},
): Promise<TestSystem> {
  const stack = await startTestStack("e2e", options.natsUrl ? { natsUrl: options.natsUrl } : {});
  const signingKeys = [await generateSigningKey()];
  const internalJwtSecret = randomBytes(32).toString("base64url");
  const fileUrlSecret = randomBytes(32).toString("base64url");
  const filesDir = await temporaryDirectory(stack, "rowbase-files-");
  const system = await startSystem({
    env: { SMTP_URL: stack.mail.url, RATE_LIMITS: RELAXED_RATE_LIMITS, ...env },
    databaseUrl: stack.databaseUrl,
    redisUrl: stack.redisUrl,
    natsUrl: stack.natsUrl,
    internalJwtSecret,
    fileUrlSecret,
    filesDir,
    jwtSigningKeys: JSON.stringify(signingKeys),
    port: 0,
    logger: createLogger(
      "e2e",
      options.logs ? "info" : (process.env.TEST_LOG_LEVEL ?? "silent"),
      options.logs,
    ),
    logDestination: options.logs,
    namespace: stack.namespace,
  });
  stack.onStop(() => system.stop());
  const replica = serveOn(stack, system.grpcUrls, {
    jwtSigningKeys: JSON.stringify(signingKeys),
    filesDir: env.FILES_DIR ?? filesDir,
    fileUrlSecret,
    common: { ...env, INTERNAL_JWT_SECRET: internalJwtSecret },
  });
  return {
    baseUrl: `http://127.0.0.1:${system.port}`,
    mail: stack.mail,
    system,
    signingKeys,
    replica,
    databaseUrl: stack.databaseUrl,
    natsUrl: stack.natsUrl,
    namespace: stack.namespace,
    internalJwtSecret,
    filesDir: env.FILES_DIR ?? filesDir,
    stop: () => stack.stop(),
  };
}
