import { randomBytes, randomUUID } from "node:crypto";
import net from "node:net";
import { type DescMessage, fromBinary, type MessageShape } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import pg from "pg";
import type { BusMessage } from "./bus.js";
import { createOrm, migrate, type Orm, type OrmOptions } from "./db.js";
import { errorInfoOf, VALIDATION_REASON, type ValidationItem } from "./errors.js";
import { PRINCIPAL_HEADER, type Principal, signPrincipal } from "./principal.js";

/**
 * Where the real PostgreSQL, Redis and NATS for tests are: the URLs from the environment
 * (TEST_DATABASE_URL / DATABASE_URL, REDIS_URL, NATS_URL), else the default local ports when
 * something answers there, else containers started by testcontainers when a container runtime
 * exists. Otherwise it fails and says what to start.
 */
export interface TestInfra {
  databaseUrl: string;
  redisUrl: string;
  natsUrl: string;
}

let infra: Promise<TestInfra> | undefined;

export function testInfra(): Promise<TestInfra> {
  infra ??= discover();
  return infra;
}

function answers(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port, timeout: 1000 });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
    socket.once("timeout", () => {
      socket.destroy();
      resolve(false);
    });
  });
}

async function discover(): Promise<TestInfra> {
  const env = process.env;
  const [databaseUrl, redisUrl, natsUrl] = await Promise.all([
    find(
      env.TEST_DATABASE_URL ?? env.DATABASE_URL,
      5432,
      "postgres://postgres@127.0.0.1:5432/postgres",
      {
        image: "postgres:16-alpine",
        port: 5432,
        env: { POSTGRES_HOST_AUTH_METHOD: "trust" },
        url: (host, port) => `postgres://postgres@${host}:${port}/postgres`,
      },
    ),
    find(env.REDIS_URL, 6379, "redis://127.0.0.1:6379", {
      image: "redis:7-alpine",
      port: 6379,
      url: (host, port) => `redis://${host}:${port}`,
    }),
    find(env.NATS_URL, 4222, "nats://127.0.0.1:4222", {
      image: "nats:2.10-alpine",
      port: 4222,
      command: ["-js"],
      url: (host, port) => `nats://${host}:${port}`,
    }),
  ]);
  return { databaseUrl, redisUrl, natsUrl };
}

interface ContainerSpec {
  image: string;
  port: number;
  env?: Record<string, string>;
  command?: string[];
  url: (host: string, port: number) => string;
}

async function find(
  fromEnv: string | undefined,
  localPort: number,
  localUrl: string,
  container: ContainerSpec,
): Promise<string> {
  if (fromEnv) return fromEnv;
  if (await answers("127.0.0.1", localPort)) return localUrl;
  const tc = await import("testcontainers");
  try {
    await tc.getContainerRuntimeClient();
  } catch {
    throw new Error(
      `Nothing answers on 127.0.0.1:${localPort} and no container runtime is available for ${container.image}. ` +
        "Start PostgreSQL (5432), Redis (6379) and NATS with JetStream (4222) locally, or set " +
        "DATABASE_URL / REDIS_URL / NATS_URL (see README, 'Running the tests').",
    );
  }
  let generic = new tc.GenericContainer(container.image).withExposedPorts(container.port);
  if (container.env) generic = generic.withEnvironment(container.env);
  if (container.command) generic = generic.withCommand(container.command);
  const started = await generic.start();
  return container.url(started.getHost(), started.getMappedPort(container.port));
}

/** A short random suffix for database, key-prefix and stream names of one test run. */
export function uniqueName(prefix: string): string {
  return `${prefix}_${randomBytes(5).toString("hex")}`;
}

/**
 * Migrates a schema up to, not including, the migration named `next`, and runs `seed` on the
 * schema as it was then; returns the migrations applied. The test then runs the service's own
 * migrate, which applies `next` over what `seed` wrote.
 */
export async function migrateBefore(
  options: OrmOptions,
  next: string,
  seed: (orm: Orm) => Promise<unknown>,
): Promise<string[]> {
  const index = options.migrations.findIndex((migration) => migration.name === next);
  if (index < 0) throw new Error(`no migration ${next}`);
  const old = await createOrm({ ...options, migrations: options.migrations.slice(0, index) });
  try {
    const applied = await migrate(old, options.schema);
    await seed(old);
    return applied;
  } finally {
    await old.close();
  }
}

/**
 * A session of its own on `url` with `schema` as its search path, for a test that needs several
 * at once (writers racing, a lock held by another); the caller ends it.
 */
export async function sessionIn(url: string, schema: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url, options: `-c search_path=${schema}` });
  await client.connect();
  return client;
}

/**
 * A fresh, empty database on the test server; `drop()` removes it. With `locale` it is made from
 * template0 with that locale and `encoding` (UTF8 unless given), as a cluster made by `initdb`
 * under another locale would give: `"C"` folds case for ASCII only where the server's default
 * may fold more, and `initdb` under C encodes in SQL_ASCII unless told otherwise.
 */
export async function createTestDatabase(
  serverUrl: string,
  options: { locale?: string; encoding?: string } = {},
): Promise<{ url: string; name: string; drop(): Promise<void> }> {
  const name = uniqueName("rb_test");
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    const locale = options.locale
      ? ` template template0 locale ${admin.escapeLiteral(options.locale)} encoding ${admin.escapeLiteral(options.encoding ?? "UTF8")}`
      : "";
    await admin.query(`create database ${name}${locale}`);
  } finally {
    await admin.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    async drop() {
      const client = new pg.Client({ connectionString: serverUrl });
      await client.connect();
      try {
        await client.query(`drop database if exists ${name} with (force)`);
      } finally {
        await client.end();
      }
    },
  };
}

export interface CaughtMail {
  to: string[];
  subject: string;
  raw: string;
}

export interface MailCatcher {
  /** `smtp://127.0.0.1:<port>`, for SMTP_URL. */
  url: string;
  messages: CaughtMail[];
  /** The latest message to `address`, waiting up to 5 s for one newer than `after`. */
  next(address: string, after?: number): Promise<CaughtMail>;
  close(): Promise<void>;
}

/** A real SMTP server on a free loopback port that keeps what it receives. */
export async function startMailCatcher(): Promise<MailCatcher> {
  const { SMTPServer } = await import("smtp-server");
  const messages: CaughtMail[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ["STARTTLS"],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("end", () => {
        const raw = Buffer.concat(chunks).toString("utf8");
        const subject = /^Subject: (.*)$/m.exec(raw)?.[1]?.trim() ?? "";
        messages.push({ to: session.envelope.rcptTo.map((r) => r.address), subject, raw });
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.server.address() as net.AddressInfo;
  return {
    url: `smtp://127.0.0.1:${port}`,
    messages,
    async next(address, after = 0) {
      const deadline = Date.now() + 5000;
      for (;;) {
        const found = messages.filter((m, i) => i >= after && m.to.includes(address)).at(-1);
        if (found) return found;
        if (Date.now() > deadline) throw new Error(`no mail to ${address}`);
        await new Promise((r) => setTimeout(r, 25));
      }
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
/**
 * Call options carrying `who` as a principal signed with `secret`, as the gateway sends them to a
 * service; a user (anything with an `id` and no `kind`) gets a session of its own.
 */
export async function signedAs(
  secret: string,
  who: { id: bigint } | Principal,
): Promise<{ headers: Record<string, string> }> {
  const principal: Principal =
    "kind" in who ? who : { kind: "user", userId: who.id, sessionId: randomUUID() };
  return { headers: { [PRINCIPAL_HEADER]: await signPrincipal(secret, principal) } };
}

/** What a call that had to fail answered: its gRPC code, domain reason and metadata. */
export interface CallFailure {
  code: Code;
  reason: string | undefined;
  metadata: Record<string, string>;
}

/** The failure of an RPC that must fail; throws when it succeeds, or fails other than by RPC. */
export async function failureOf(call: Promise<unknown>): Promise<CallFailure> {
  try {
    await call;
  } catch (error) {
    if (!(error instanceof ConnectError)) {
      throw new Error("expected the call to fail with a ConnectError", { cause: error });
    }
    const info = errorInfoOf(error);
    return { code: error.code, reason: info?.reason, metadata: { ...(info?.metadata ?? {}) } };
  }
  throw new Error("expected the call to fail");
}

/** The domain reason of an RPC that must fail. */
export async function reasonOf(call: Promise<unknown>): Promise<string | undefined> {
  return (await failureOf(call)).reason;
}

/** The items of a `validation_failed` error (InvalidArgument); throws for any other answer. */
export async function validationOf(call: Promise<unknown>): Promise<ValidationItem[]> {
  const failure = await failureOf(call);
  if (failure.reason !== VALIDATION_REASON || failure.code !== Code.InvalidArgument) {
    throw new Error(`expected validation_failed, got ${failure.reason} (code ${failure.code})`);
  }
  return JSON.parse(failure.metadata.extra ?? "[]");
}

/** What calling a client's `method` answers. */
type AnswerOf<F> = F extends (...args: never[]) => Promise<infer A> ? A : never;

/** A client whose answers to one method are held back (`holdAnswers`). */
export interface HeldAnswers<C, A> {
  /** The client, `method` held, everything else as it was. */
  client: C;
  /** The first answer, once it has arrived (and is being held). */
  answered: Promise<A>;
  /** Hands the held answers to their callers, and every later one at once. */
  release(): void;
}

/**
 * `client` with the answers of `method` held until `release()`: the call is made, and its
 * answer arrives, but its caller gets it only then. For a race of a lookup that read something
 * before a change with the change (a plan, a table schema): change it once `answered`, then
 * release.
 */
export function holdAnswers<C extends object, K extends keyof C>(
  client: C,
  method: K,
): HeldAnswers<C, AnswerOf<C[K]>> {
  let release = () => {};
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  let answer: (value: AnswerOf<C[K]>) => void = () => {};
  const answered = new Promise<AnswerOf<C[K]>>((resolve) => {
    answer = resolve;
  });
  const call = client[method] as (...args: unknown[]) => Promise<AnswerOf<C[K]>>;
  const holding = async (...args: unknown[]) => {
    const value = await call.apply(client, args);
    answer(value);
    await held;
    return value;
  };
  const proxy = new Proxy(client, {
    get: (target, property, receiver) =>
      property === method ? holding : Reflect.get(target, property, receiver),
  });
  return { client: proxy, answered, release };
}

/** Decodes the published messages of one subject. */
export function eventsOf<D extends DescMessage>(
  events: readonly BusMessage[],
  subject: string,
  schema: D,
): MessageShape<D>[] {
  return events.filter((e) => e.subject === subject).map((e) => fromBinary(schema, e.data));
}

export { type NatsServerProcess, startNatsServer } from "./nats-server.js";
export {
  attribute,
  type ExportedSpan,
  startTestCollector,
  type TestCollector,
} from "./otlp-collector.js";
export { type RedisServerProcess, startRedisServer, waitFor } from "./redis-server.js";
export {
  as,
  type ServedService,
  startTestStack,
  TEST_SECRET,
  type TestServiceDeps,
  type TestStack,
} from "./test-stack.js";
