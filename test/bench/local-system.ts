import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, openSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { generateSigningKey } from "@rowbase/identity";
import { createLogger, freePort, NatsBus, RedisCache, STREAMS } from "@rowbase/kit";
import { type MailCatcher, startMailCatcher, testInfra } from "@rowbase/kit/testing";
import pg from "pg";
import { createMemoryCgroups } from "./memory-limit.js";
import { MIGRATED, PIECES, type Piece } from "./pieces.js";

/** Where each piece's entry point is, relative to the repository. */
const PACKAGE_DIR: Record<Piece, string> = {
  identity: "services/identity",
  organization: "services/organization",
  catalog: "services/catalog",
  records: "services/records",
  files: "services/files",
  webhooks: "services/webhooks",
  gateway: "gateway",
};

export interface LocalSystemOptions {
  /** Run the processes from TypeScript sources (tsx) instead of the compiled `dist`. */
  source: boolean;
  /** LOG_LEVEL of every process (their lines go to files under the run's directory). */
  logLevel: string;
  /** NODE_OPTIONS of each process (the chart's, or what a run tries instead). */
  nodeOptions?: Partial<Record<Piece, string>>;
  /** Where each process writes a V8 CPU profile (`<piece>-<time>.cpuprofile`) as it stops. */
  cpuProfileDir?: string;
  /**
   * Where each process writes a sampled allocation profile (`<piece>-<time>.heapprofile`, every
   * allocation, collected or not) as it stops.
   */
  allocProfileDir?: string;
  /** More `node` flags for every process, those NODE_OPTIONS refuses among them. */
  nodeArgs?: string[];
  /**
   * Each piece's memory limit in bytes (the chart's), enforced by a memory cgroup per process
   * where this machine lets the benchmark make them; Node sizes V8's heap from it.
   */
  memoryLimits?: Partial<Record<Piece, number>>;
  /** Prints a progress line. */
  say(line: string): void;
  /**
   * Servers to use instead of the test infrastructure's (the fault tests bring a PostgreSQL and a
   * Redis of their own, to stop and start them); each one independently.
   */
  servers?: { databaseUrl?: string; redisUrl?: string; natsUrl?: string };
  /** The gateway's `RATE_LIMITS` (default `off`). */
  rateLimits?: string;
  /**
   * WEBHOOK_ALLOWED_TARGETS of the webhooks service: a receiver of the benchmark's on loopback
   * (webhooks reach public addresses only by default).
   */
  webhookTargets?: string;
}

export interface LocalSystem {
  baseUrl: string;
  organizationGrpcUrl: string;
  internalJwtSecret: string;
  databaseUrl: string;
  natsUrl: string;
  namespace: string;
  mail: MailCatcher;
  /** The running processes by piece. */
  pids(): Map<Piece, number>;
  /** Where the processes' logs are (kept when the run fails). */
  logsDir: string;
  /** Stops every process and removes the database, the streams, the keys and the files. */
  stop(options: { keepLogs: boolean }): Promise<void>;
  /** Sends `signal` to one process; for SIGKILL and SIGTERM, waits until it exited. */
  signal(piece: Piece, signal: NodeJS.Signals): Promise<void>;
  /** Starts a piece again (after it was killed) and waits until it listens. */
  restart(piece: Piece): Promise<void>;
  /** Where the memory limits are enforced, or why they are not (without `memoryLimits`: null). */
  memoryCgroups: { where: string } | { unavailable: string } | null;
}

/** The repository root: the nearest directory up whose package.json is the workspace root. */
export function repoRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const manifest = path.join(dir, "package.json");
    if (existsSync(manifest) && /"workspaces"/.test(readFileSync(manifest, "utf8"))) return dir;
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error("no workspace root above the benchmark");
    dir = parent;
  }
}

function uniqueSuffix(): string {
  return randomBytes(5).toString("hex");
}

/** A fresh database on the server of `serverUrl`; `drop` removes it (and its connections). */
async function createDatabase(serverUrl: string) {
  const name = `rb_bench_${uniqueSuffix()}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
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

/** Runs `fn`, failing after `ms` with `what` in the message. */
async function within<T>(ms: number, what: string, fn: () => Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      fn(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

async function tail(file: string, lines = 30): Promise<string> {
  try {
    return (await readFile(file, "utf8")).trimEnd().split("\n").slice(-lines).join("\n");
  } catch {
    return "(no log)";
  }
}

/**
 * Rowbase as Kubernetes runs it, on this machine: each service and the gateway in its own Node
 * process on loopback ports, against the real PostgreSQL (a fresh database), Redis (a fresh key
 * prefix) and NATS (fresh stream names), migrated first by each service's `main.js migrate` (the
 * Helm migrations Job), with a real SMTP server catching the mail and rate limits off.
 */
export async function startLocalSystem(options: LocalSystemOptions): Promise<LocalSystem> {
  const root = repoRoot();
  const cleanups: { what: string; run: () => Promise<void> }[] = [];
  const children = new Map<Piece, ChildProcess>();
  const dir = await mkdtemp(path.join(os.tmpdir(), "rowbase-bench-"));
  const logsDir = path.join(dir, "logs");
  await mkdir(logsDir);
  await mkdir(path.join(dir, "files"));
  let keepLogs = false;
  cleanups.push({
    what: "temporary files",
    run: async () => {
      if (keepLogs) await rm(path.join(dir, "files"), { recursive: true, force: true });
      else await rm(dir, { recursive: true, force: true });
    },
  });

  const stopChildren = async () => {
    const running = [...children.entries()].reverse();
    // The gateway first, so that nothing calls a service that already stopped.
    for (const [piece, child] of running) {
      children.delete(piece);
      if (child.exitCode !== null || child.signalCode !== null) continue;
      const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
      child.kill("SIGTERM");
      const timer = setTimeout(() => {
        options.say(`  ${piece} did not stop within 15 s: killing it`);
        child.kill("SIGKILL");
      }, 15_000);
      await exited;
      clearTimeout(timer);
    }
  };

  const stop = async (stopOptions: { keepLogs: boolean }) => {
    keepLogs = stopOptions.keepLogs;
    await stopChildren().catch(() => {});
    for (const cleanup of cleanups.reverse()) {
      try {
        await within(30_000, cleanup.what, cleanup.run);
      } catch (error) {
        options.say(`  cleanup of ${cleanup.what} failed: ${(error as Error).message}`);
      }
    }
    cleanups.length = 0;
  };

  try {
    const infra = { ...(await testInfra()), ...options.servers };
    const database = await createDatabase(infra.databaseUrl);
    cleanups.push({ what: "database", run: () => database.drop() });
    const namespace = `bench_${uniqueSuffix()}`;
    cleanups.push({
      what: "NATS streams",
      run: async () => {
        const bus = await NatsBus.connect(
          infra.natsUrl,
          createLogger("bench", "silent"),
          namespace,
        );
        try {
          await bus.deleteStreams(STREAMS.map((stream) => stream.name));
        } finally {
          await bus.close();
        }
      },
    });
    cleanups.push({
      what: "Redis keys",
      run: async () => {
        const cache = RedisCache.connect(infra.redisUrl);
        try {
          let cursor = "0";
          do {
            const [next, keys] = await cache.client.scan(
              cursor,
              "MATCH",
              `${namespace}:*`,
              "COUNT",
              1000,
            );
            if (keys.length > 0) await cache.client.del(...keys);
            cursor = next;
          } while (cursor !== "0");
        } finally {
          await cache.close();
        }
      },
    });
    const mail = await startMailCatcher();
    cleanups.push({ what: "mail catcher", run: () => mail.close() });

    const internalJwtSecret = randomBytes(32).toString("base64url");
    const ports = Object.fromEntries(
      await Promise.all(PIECES.map(async (piece) => [piece, await freePort()] as const)),
    ) as Record<Piece, number>;
    const url = (piece: Piece) => `http://127.0.0.1:${ports[piece]}`;
    const shared: Record<string, string> = {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? os.homedir(),
      NODE_ENV: "production",
      DATABASE_URL: database.url,
      REDIS_URL: infra.redisUrl,
      NATS_URL: infra.natsUrl,
      INTERNAL_JWT_SECRET: internalJwtSecret,
      LOG_LEVEL: options.logLevel,
      GRPC_HOST: "127.0.0.1",
      METRICS_PORT: "0",
      BENCH_NAMESPACE: namespace,
      ...(options.allocProfileDir ? { BENCH_ALLOC_PROFILE_DIR: options.allocProfileDir } : {}),
    };
    const envOf: Record<Piece, Record<string, string>> = {
      identity: {
        GRPC_PORT: String(ports.identity),
        JWT_SIGNING_KEYS: JSON.stringify([await generateSigningKey()]),
        SMTP_URL: mail.url,
      },
      organization: {
        GRPC_PORT: String(ports.organization),
        IDENTITY_GRPC_URL: url("identity"),
        CATALOG_GRPC_URL: url("catalog"),
        RECORDS_GRPC_URL: url("records"),
        FILES_GRPC_URL: url("files"),
        SMTP_URL: mail.url,
      },
      catalog: {
        GRPC_PORT: String(ports.catalog),
        ORGANIZATION_GRPC_URL: url("organization"),
        RECORDS_GRPC_URL: url("records"),
      },
      records: {
        ...(process.env.DATABASE_POOL_MAX
          ? { DATABASE_POOL_MAX: process.env.DATABASE_POOL_MAX }
          : {}),
        GRPC_PORT: String(ports.records),
        ORGANIZATION_GRPC_URL: url("organization"),
        CATALOG_GRPC_URL: url("catalog"),
        FILES_GRPC_URL: url("files"),
      },
      files: {
        GRPC_PORT: String(ports.files),
        ORGANIZATION_GRPC_URL: url("organization"),
        CATALOG_GRPC_URL: url("catalog"),
        RECORDS_GRPC_URL: url("records"),
        FILE_URL_SECRET: randomBytes(32).toString("base64url"),
        FILES_DIR: path.join(dir, "files"),
      },
      webhooks: {
        GRPC_PORT: String(ports.webhooks),
        ORGANIZATION_GRPC_URL: url("organization"),
        CATALOG_GRPC_URL: url("catalog"),
        RECORDS_GRPC_URL: url("records"),
        // The chart's webhooks.databasePoolMax.
        DATABASE_POOL_MAX: "4",
        SMTP_URL: mail.url,
        ...(options.webhookTargets ? { WEBHOOK_ALLOWED_TARGETS: options.webhookTargets } : {}),
      },
      gateway: {
        PORT: String(ports.gateway),
        PUBLIC_BASE_URL: url("gateway"),
        IDENTITY_GRPC_URL: url("identity"),
        ORGANIZATION_GRPC_URL: url("organization"),
        CATALOG_GRPC_URL: url("catalog"),
        RECORDS_GRPC_URL: url("records"),
        FILES_GRPC_URL: url("files"),
        WEBHOOKS_GRPC_URL: url("webhooks"),
        RATE_LIMITS: options.rateLimits ?? "off",
      },
    };
    const nodeOptionsOf = (piece: Piece): Record<string, string> => {
      const value = options.nodeOptions?.[piece];
      return value ? { NODE_OPTIONS: value } : {};
    };
    const sourceFlags = options.source ? ["--import", "tsx", "--conditions=@rowbase/source"] : [];
    const logOf = (name: string) => path.join(logsDir, `${name}.log`);
    const profileFlags = (piece: Piece) =>
      options.cpuProfileDir
        ? [
            "--cpu-prof",
            `--cpu-prof-dir=${options.cpuProfileDir}`,
            `--cpu-prof-name=${piece}-${new Date().toISOString().replace(/[:.]/g, "-")}.cpuprofile`,
          ]
        : [];

    // Each service's own entry point migrates its schema, as the Helm migrations Job runs it.
    for (const piece of MIGRATED) {
      const main = options.source
        ? path.join(PACKAGE_DIR[piece], "src/main.ts")
        : path.join(PACKAGE_DIR[piece], "dist/src/main.js");
      const log = openSync(logOf(`${piece}-migrate`), "a");
      const child = spawn(process.execPath, [...sourceFlags, main, "migrate"], {
        cwd: root,
        env: { ...shared, ...envOf[piece] },
        stdio: ["ignore", log, log],
      });
      const code = await within(
        120_000,
        `${piece} migrate`,
        () => new Promise<number | null>((resolve) => child.once("exit", resolve)),
      ).catch((error: unknown) => {
        child.kill("SIGKILL");
        throw error;
      });
      if (code !== 0) {
        throw new Error(
          `${piece} migrate exited with ${code}:\n${await tail(logOf(`${piece}-migrate`))}`,
        );
      }
    }
    options.say(`  migrated ${MIGRATED.join(", ")}`);

    const cgroups = options.memoryLimits
      ? await createMemoryCgroups(options.memoryLimits, `rowbase-${namespace}`)
      : null;
    if (cgroups && "remove" in cgroups) {
      // Cleanups run in reverse: this one last, when every process has exited.
      cleanups.unshift({ what: "memory cgroups", run: () => cgroups.remove() });
    }
    const wrap = (piece: Piece, argv: string[]) =>
      cgroups && "wrap" in cgroups
        ? cgroups.wrap(piece, argv)
        : { command: argv[0] ?? "", args: argv.slice(1) };

    const launcher = options.source
      ? "test/bench/service-process.ts"
      : "test/dist/bench/service-process.js";
    if (!existsSync(path.join(root, launcher))) {
      throw new Error(`${launcher} is missing: build first (npx tsc -b) or pass --source`);
    }
    const launch = async (piece: Piece) => {
      const log = openSync(logOf(piece), "a");
      const { command, args } = wrap(piece, [
        process.execPath,
        ...sourceFlags,
        ...profileFlags(piece),
        ...(options.nodeArgs ?? []),
        launcher,
        piece,
      ]);
      const child = spawn(command, args, {
        cwd: root,
        env: { ...shared, ...nodeOptionsOf(piece), ...envOf[piece] },
        stdio: ["ignore", log, log, "ipc"],
      });
      children.set(piece, child);
      await within(
        60_000,
        `${piece} start`,
        () =>
          new Promise<void>((resolve, reject) => {
            child.once("message", () => resolve());
            child.once("exit", (code) => reject(new Error(`${piece} exited with ${code}`)));
          }),
      ).catch(async (error: unknown) => {
        throw new Error(`${(error as Error).message}\n${await tail(logOf(piece))}`);
      });
      child.removeAllListeners("exit");
      child.on("exit", (code, signal) => {
        if (children.get(piece) === child) {
          options.say(`  !! ${piece} exited (${code ?? signal}); see ${logOf(piece)}`);
        }
      });
    };
    for (const piece of PIECES) await launch(piece);
    options.say(`  started ${PIECES.join(", ")} (one process each), logs in ${logsDir}`);

    return {
      baseUrl: url("gateway"),
      organizationGrpcUrl: url("organization"),
      internalJwtSecret,
      databaseUrl: database.url,
      natsUrl: infra.natsUrl,
      namespace,
      mail,
      logsDir,
      memoryCgroups: cgroups && ("where" in cgroups ? { where: cgroups.where } : cgroups),
      pids: () =>
        new Map(
          [...children.entries()]
            .filter(([, child]) => child.pid !== undefined && child.exitCode === null)
            .map(([piece, child]) => [piece, child.pid!]),
        ),
      stop,
      async signal(piece, signal) {
        const child = children.get(piece);
        if (!child || child.exitCode !== null || child.signalCode !== null) return;
        const waits = signal === "SIGKILL" || signal === "SIGTERM";
        if (waits) children.delete(piece);
        const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
        child.kill(signal);
        if (waits) await exited;
      },
      async restart(piece) {
        const running = children.get(piece);
        if (running && running.exitCode === null && running.signalCode === null) {
          throw new Error(`${piece} is still running`);
        }
        await launch(piece);
      },
    };
  } catch (error) {
    await stop({ keepLogs: true });
    throw error;
  }
}
