import { randomInt } from "node:crypto";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { parseArgs } from "node:util";
import { create } from "@bufbuild/protobuf";
import { AuditEventSchema } from "@rowbase/proto/rowbase/events/v1/audit_events_pb";
import type pg from "pg";
import { Abort, driveHttp, driveRaw, type Measured } from "./load.js";
import { type LocalSystem, repoRoot, startLocalSystem } from "./local-system.js";
import { type ChartProcess, chartProcesses } from "./memory-limit.js";
import type { Piece } from "./pieces.js";
import { ProcessSampler } from "./process-sampler.js";
import {
  auditSample,
  benchRows,
  benchSchema,
  type RawWriteTarget,
  rawPool,
  rawRowIds,
  rawWriteSchema,
  removeRawWrites,
} from "./raw-postgres.js";
import {
  describeMachine,
  markdown,
  round,
  type ScenarioResult,
  type ScenarioUsage,
  type Summary,
  scenarioLines,
  streamLatencyLine,
  webhookDeliveryLine,
  writeSummary,
} from "./report.js";
import { type Scenario, type ScenarioContext, scenarios } from "./scenarios.js";
import { Api, benchPlan, login, seedTenant, type Tenant } from "./seed.js";
import { settle } from "./settle.js";
import { type StreamLatency, startStreamProbe } from "./stream-latency.js";
import {
  type BenchReceiver,
  startBenchReceiver,
  startWebhookProbe,
  type WebhookDelivery,
} from "./webhook-delivery.js";

const HELP = `npm run bench [-- options]

Starts Rowbase (each service and the gateway as its own process) against the PostgreSQL,
Redis and NATS of the tests (DATABASE_URL, REDIS_URL, NATS_URL or the local default ports),
seeds a business-plan organization (enterprise past 500,000 records), drives every scenario with autocannon, runs the same
statements straight against PostgreSQL as the ceiling, writes test/bench/results/latest.json
and prints a Markdown table. See test/bench/README.md.

  --quick          10,000 records, 5 s per scenario (default: 100,000 records, 20 s)
  --records N      seed N records instead (1,000 to 10,000,000; the deep-offset scenario reads
                   at nine tenths of them), with --quick's or the full timings
  --only a,b       only the scenarios whose name contains one of these
  --source         run the processes from TypeScript sources (tsx) instead of dist/
  --cpu-prof       write a V8 CPU profile of each process into test/bench/results/profiles
  --alloc-prof     write a sampled allocation profile of each process there too
  --out FILE       where the JSON goes (default test/bench/results/latest.json)
  --unlimited      run the processes without the chart's memory limits (by default each is
                   put in a memory cgroup of its chart limit where this machine allows it)
  --no-probes      no change stream and no webhook next to the creates (to compare the
                   write path with a build that had neither)

With BASE_URL set it starts nothing and drives that gateway: BENCH_EMAIL and BENCH_PASSWORD
(a verified user) are then needed; BENCH_ORGANIZATION_ID reuses an organization;
ORGANIZATION_GRPC_URL and INTERNAL_JWT_SECRET put it on the business plan; DATABASE_URL
(its database) enables the raw-postgres ceiling.`;

const CONNECTIONS = 32;

/** The scenario next to which a change stream's latency is measured. */
const STREAM_PROBE_SCENARIO = "create one";

/** The scenarios next to which a webhook on the benchmark table delivers their changes. */
const webhookProbed = (name: string) => name === "create one" || name.startsWith("batch create");

/**
 * Each process's NODE_OPTIONS and memory limit: the chart's, unless BENCH_NODE_OPTIONS (for
 * every process) or --unlimited say otherwise.
 */
function processSettings(chart: Record<Piece, ChartProcess>) {
  const pieces = Object.keys(chart) as Piece[];
  const pick = <T>(of: (piece: Piece) => T | undefined) =>
    Object.fromEntries(
      pieces.flatMap((piece) => {
        const value = of(piece);
        return value === undefined ? [] : [[piece, value]];
      }),
    ) as Partial<Record<Piece, T>>;
  return {
    nodeOptions: pick((piece) => process.env.BENCH_NODE_OPTIONS ?? chart[piece].nodeOptions),
    ...(args.unlimited ? {} : { memoryLimits: pick((piece) => chart[piece].memoryLimit) }),
  };
}

/** How the processes' memory was limited, for the report's first line. */
function limitsText(cgroups: LocalSystem["memoryCgroups"]): string {
  if (cgroups === null) return "no memory limit (--unlimited)";
  if ("unavailable" in cgroups) return `no memory limit (no cgroup: ${cgroups.unavailable})`;
  return "each in a memory cgroup of its chart limit";
}

/** Why the run was stopped early (time limit, signal), if it was. */
let abortedWith = "";

function say(line: string) {
  process.stdout.write(`${line}\n`);
}

const { values: args } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    records: { type: "string" },
    only: { type: "string" },
    source: { type: "boolean", default: false },
    "cpu-prof": { type: "boolean", default: false },
    "alloc-prof": { type: "boolean", default: false },
    out: { type: "string" },
    unlimited: { type: "boolean", default: false },
    "no-probes": { type: "boolean", default: false },
    help: { type: "boolean", default: false },
  },
});

interface Settings {
  records: number;
  seconds: number;
  warmup: number;
  rawWarmup: number;
  deepOffset: number;
  /**
   * The longest wait for events to settle: the batch scenario leaves a few hundred thousand
   * audit events, which organization stores at about 3,000 a second on 2 cores.
   */
  settleMs: number;
}

interface ScenarioRunner {
  api: Api;
  pool: pg.Pool | undefined;
  sampler: ProcessSampler | undefined;
  abort: Abort;
  /** Throws once the run has been stopped. */
  check(): void;
  ctx: ScenarioContext;
  settings: Settings;
  organizationId: number;
  /** The run's NATS, when the benchmark started the system (for `settle`). */
  nats: { url: string; namespace: string } | undefined;
}

/**
 * Waits until the background work of what ran before is done (see settle.ts), saying how long
 * that took, or what is still pending after the run's limit.
 */
async function settleBefore(runner: ScenarioRunner) {
  const started = Date.now();
  const pending = await settle(runner.pool, runner.nats, runner.settings.settleMs);
  const waited = (Date.now() - started) / 1000;
  if (pending) say(`  (${pending})`);
  else if (waited >= 1) say(`  (the events before it took ${waited.toFixed(1)} s to settle)`);
}

/**
 * Calls a creating scenario may make before the organization's record limit: the business
 * plan's million would be passed by a fast enough batch scenario, and a refused create is an
 * error, not a measurement.
 */
async function callsBeforeLimit(runner: ScenarioRunner, creates: number): Promise<number> {
  const now = await runner.api.call<{
    limits: { records: number };
    usage: { records: number };
  }>("GET", "/organization/limits", {
    token: runner.ctx.sessionToken,
    query: { organization_id: runner.organizationId },
  });
  // Connections still in flight when the guard stops may each add one more call.
  const calls = Math.floor(
    (now.limits.records - now.usage.records - CONNECTIONS * creates) / creates,
  );
  if (calls < CONNECTIONS) throw new Error("the organization's record limit leaves no room");
  return calls;
}

/**
 * Warm-up, the measured run with autocannon, then the raw-postgres ceiling of one scenario;
 * `loadEnded` is called as the measured run ends.
 */
async function runScenario(scenario: Scenario, runner: ScenarioRunner, loadEnded?: () => void) {
  const { api, pool, sampler, abort, check, ctx, settings } = runner;
  await scenario.prepare?.(ctx, api);
  if (pool && scenario.check) await scenario.check(ctx, api, pool);
  const requests = scenario.requests(ctx);
  const load = async (seconds: number) => {
    const maxRequests = scenario.creates
      ? await callsBeforeLimit(runner, scenario.creates)
      : undefined;
    const measured = await driveHttp(
      {
        url: api.baseUrl,
        connections: CONNECTIONS,
        seconds,
        requests,
        ...(maxRequests ? { maxRequests } : {}),
      },
      abort,
    );
    check();
    return measured;
  };
  await load(settings.warmup);
  await sampler?.begin();
  const measured = await load(settings.seconds);
  loadEnded?.();
  const used: ScenarioUsage | undefined = sampler ? await sampler.end() : undefined;

  let raw: Measured | undefined;
  if (pool) {
    // The scenario's own events (audit log, usage) are Rowbase's work, not the ceiling's.
    await settleBefore(runner);
    if (scenario.auditAction) {
      const sample = await auditSample(pool, scenario.auditAction);
      if (scenario.auditAction === "record.created") ctx.rawTarget.createdEvent = sample;
      else ctx.rawTarget.updatedEvent = sample;
    }
    const operation = scenario.raw(ctx);
    await driveRaw(pool, CONNECTIONS, settings.rawWarmup, operation, abort);
    check();
    await sampler?.begin();
    raw = await driveRaw(pool, CONNECTIONS, settings.seconds, operation, abort);
    if (used && sampler) {
      const rawUsed = await sampler.end();
      used.rawCpu = rawUsed.cpu;
      used.rawOthers = rawUsed.others;
    }
    check();
  }
  const result: ScenarioResult = {
    name: scenario.name,
    rps: round(measured.rps, 1),
    p50_ms: round(measured.p50_ms, 2),
    p99_ms: round(measured.p99_ms, 2),
    errors: measured.errors,
    raw_rps: raw ? round(raw.rps, 1) : null,
    ratio: raw && raw.rps > 0 ? round(measured.rps / raw.rps, 3) : null,
  };
  return { result, measured, raw, used };
}

async function main(): Promise<number> {
  if (args.help) {
    say(HELP);
    return 0;
  }
  const env = process.env;
  const quick = args.quick;
  const settings: Settings = quick
    ? { records: 10_000, seconds: 5, warmup: 1, rawWarmup: 1, deepOffset: 9_000, settleMs: 60_000 }
    : {
        records: 100_000,
        seconds: 20,
        warmup: 3,
        rawWarmup: 2,
        deepOffset: 90_000,
        settleMs: 180_000,
      };
  if (args.records !== undefined) {
    const records = Number(args.records);
    if (!Number.isInteger(records) || records < 1_000 || records > 10_000_000) {
      throw new Error(
        `--records takes a whole number from 1,000 to 10,000,000, got ${args.records}`,
      );
    }
    settings.records = records;
    settings.deepOffset = Math.floor(records * 0.9);
  }
  const root = repoRoot();
  const profilesDir = path.join(root, "test/bench/results/profiles");
  if (args["alloc-prof"]) await mkdir(profilesDir, { recursive: true });
  const out = path.resolve(args.out ?? path.join(root, "test/bench/results/latest.json"));
  const only = args.only?.split(",").map((s) => s.trim().toLowerCase());
  const chosen = scenarios(settings.deepOffset).filter(
    (s) => !only || only.some((word) => s.name.toLowerCase().includes(word)),
  );
  if (chosen.length === 0) throw new Error(`no scenario matches --only ${args.only}`);

  // The whole run is bounded: past this, the load stops and everything is cleaned up.
  const limitMinutes = quick ? 15 : 45;
  const abort = new Abort();
  const stopRun = (reason: string) => {
    if (abort.aborted) return;
    abortedWith = reason;
    say(`\n!! ${reason}: stopping and cleaning up`);
    abort.abort();
    // Should a request or the cleanup hang, leave anyway: the processes stop by themselves
    // when this one is gone (their IPC channel closes).
    setTimeout(() => process.exit(1), 180_000).unref();
  };
  const limitTimer = setTimeout(
    () => stopRun(`the run took longer than ${limitMinutes} minutes`),
    limitMinutes * 60_000,
  );
  limitTimer.unref();
  process.once("SIGINT", () => stopRun("interrupted"));
  process.once("SIGTERM", () => stopRun("terminated"));
  const check = () => {
    if (abort.aborted) throw new Error(abortedWith);
  };

  const started = Date.now();
  let system: LocalSystem | undefined;
  let receiver: BenchReceiver | undefined;
  let pool: pg.Pool | undefined;
  let sampler: ProcessSampler | undefined;
  let api: Api | undefined;
  let tenant: Tenant | undefined;
  let createdOrganization = false;
  /** Keeps the processes' logs: set until the run ends well. */
  let failed = true;
  const rawTarget: RawWriteTarget = {
    // Ids far above anything Rowbase hands out: raw writes never touch the benchmark's table
    // or the organization's quota.
    tableId: 9_000_000_000_000_000_000n + BigInt(randomInt(1, 2 ** 40)),
    organizationId: 9_000_000_000_000_000_000n + BigInt(randomInt(1, 2 ** 40)),
    actor: "api_token:0",
    createdEvent: create(AuditEventSchema),
    updatedEvent: create(AuditEventSchema),
    rowIds: rawRowIds(),
  };
  try {
    const baseUrl = env.BASE_URL;
    let databaseUrl: string | undefined;
    let admin: { organizationUrl: string; internalSecret: string } | undefined;
    say(
      `Rowbase benchmark${quick ? " (--quick)" : ""}: ${settings.records.toLocaleString("en-US")} records, ${CONNECTIONS} connections, ${settings.seconds} s per scenario after ${settings.warmup} s of warm-up`,
    );
    if (baseUrl) {
      say(`- target ${baseUrl} (BASE_URL: nothing is started)`);
      databaseUrl = env.DATABASE_URL;
      if (env.ORGANIZATION_GRPC_URL && env.INTERNAL_JWT_SECRET) {
        admin = {
          organizationUrl: env.ORGANIZATION_GRPC_URL,
          internalSecret: env.INTERNAL_JWT_SECRET,
        };
      }
    } else {
      say("- starting Rowbase: one process per service and the gateway");
      receiver = await startBenchReceiver();
      system = await startLocalSystem({
        webhookTargets: receiver.target,
        source: args.source,
        logLevel: env.BENCH_LOG_LEVEL ?? "info",
        ...processSettings(await chartProcesses(repoRoot())),
        ...(args["cpu-prof"] ? { cpuProfileDir: profilesDir } : {}),
        ...(args["alloc-prof"] ? { allocProfileDir: profilesDir } : {}),
        ...(env.BENCH_NODE_ARGS
          ? { nodeArgs: env.BENCH_NODE_ARGS.split(" ").filter(Boolean) }
          : {}),
        say,
      });
      say(`  ${limitsText(system.memoryCgroups)}`);
      databaseUrl = system.databaseUrl;
      admin = {
        organizationUrl: system.organizationGrpcUrl,
        internalSecret: system.internalJwtSecret,
      };
      sampler = new ProcessSampler(() => system!.pids());
      sampler.start();
    }
    check();
    api = new Api(baseUrl ?? system!.baseUrl);
    say(`- seeding ${settings.records.toLocaleString("en-US")} records through the batch route`);
    const organizationId = env.BENCH_ORGANIZATION_ID
      ? Number(env.BENCH_ORGANIZATION_ID)
      : undefined;
    createdOrganization = organizationId === undefined;
    tenant = await seedTenant(api, {
      records: settings.records,
      ...(system
        ? { mail: system.mail }
        : { email: env.BENCH_EMAIL, password: env.BENCH_PASSWORD }),
      ...(organizationId !== undefined ? { organizationId } : {}),
      ...(admin ? { admin } : {}),
      say,
    });
    const limits = await api.call<{ plan: string }>("GET", "/organization/limits", {
      token: tenant.sessionToken,
      query: { organization_id: tenant.organizationId },
    });
    const plan = benchPlan(settings.records).name;
    if (limits.plan !== plan) {
      say(`  !! the organization is on the ${limits.plan} plan, not ${plan}`);
    }
    check();

    let postgresVersion: string | undefined;
    if (databaseUrl) {
      const bench = benchSchema(tenant);
      pool = await rawPool(databaseUrl, CONNECTIONS, rawWriteSchema(bench, rawTarget));
      postgresVersion = (
        await pool.query<{ v: string }>("select current_setting('server_version') as v")
      ).rows[0]?.v;
      if (sampler) {
        const backends = pool;
        sampler.backendPids = async () =>
          (
            await backends.query<{ pid: number }>(
              "select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()",
            )
          ).rows.map((row) => row.pid);
      }
      if (system) {
        // Steady state: autovacuum would have analysed a table this size within a minute.
        await pool.query(`vacuum analyze ${benchRows(bench).relation}`);
      }
    } else {
      say("  (no DATABASE_URL: the raw-postgres ceiling is left out)");
    }

    const ctx: ScenarioContext = {
      tenant,
      deepOffset: settings.deepOffset,
      sessionToken: tenant.sessionToken,
      rawTarget,
      indexed: new Set(),
    };
    const results: ScenarioResult[] = [];
    const usage = new Map<string, ScenarioUsage>();
    let streamLatency: StreamLatency | undefined;
    const webhookDelivery: WebhookDelivery[] = [];
    const nats = system ? { url: system.natsUrl, namespace: system.namespace } : undefined;

    const runner: ScenarioRunner = {
      api,
      pool,
      sampler,
      abort,
      check,
      ctx,
      settings,
      organizationId: tenant.organizationId,
      nats,
    };
    for (const scenario of chosen) {
      check();
      await settleBefore(runner);
      if (scenario.name.includes("session")) {
        ctx.sessionToken = await login(api, tenant.email, tenant.password);
      }
      // A change stream next to the single creates: how soon a subscriber sees a change.
      const probes = !args["no-probes"];
      const probe =
        probes && scenario.name === STREAM_PROBE_SCENARIO
          ? await startStreamProbe(api, tenant)
          : undefined;
      // A webhook on the table the creates write to: how many deliveries a second, how soon.
      const hook =
        probes && receiver && webhookProbed(scenario.name)
          ? await startWebhookProbe(api, tenant, receiver, scenario.name)
          : undefined;
      const { result, measured, raw, used } = await runScenario(scenario, runner, () =>
        hook?.loadEnded(),
      );
      if (probe) {
        streamLatency = await probe.stop();
        say(streamLatencyLine(streamLatency));
      }
      if (hook) {
        const delivered = await hook.stop();
        webhookDelivery.push(delivered);
        say(webhookDeliveryLine(delivered));
      }
      results.push(result);
      if (used) usage.set(scenario.name, used);
      for (const line of scenarioLines(result, measured, raw, used)) say(line);
    }

    const summary: Summary = {
      date: new Date().toISOString(),
      machine: describeMachine(postgresVersion),
      options: {
        quick,
        records: settings.records,
        seconds: settings.seconds,
        connections: CONNECTIONS,
        target: baseUrl
          ? `BASE_URL ${baseUrl}`
          : `one process per service${args.source ? " (from sources)" : ""}, ${limitsText(system?.memoryCgroups ?? null)}, loopback`,
      },
      scenarios: results,
      ...(streamLatency ? { stream_latency: streamLatency } : {}),
      ...(webhookDelivery.length > 0 ? { webhook_delivery: webhookDelivery } : {}),
      rss_mb: sampler ? await sampler.peaks() : {},
    };
    await writeSummary(out, summary);
    const minutes = ((Date.now() - started) / 60_000).toFixed(1);
    say(`\nWrote ${path.relative(process.cwd(), out)} (the run took ${minutes} min)\n`);
    say(markdown(summary, usage));
    const errors = results.reduce((sum, r) => sum + r.errors, 0);
    // The logs tell what the failed requests were.
    failed = errors > 0;
    if (errors > 0) {
      say(`!! ${errors} requests failed (non-2xx or connection errors): see above`);
      return 1;
    }
    return 0;
  } finally {
    clearTimeout(limitTimer);
    sampler?.stop();
    say("- cleaning up");
    if (pool) await pool.end().catch(() => {});
    if (system) {
      await system.stop({ keepLogs: failed });
      await receiver?.close();
      if (failed) say(`  the processes' logs are kept in ${system.logsDir}`);
    } else if (api && tenant) {
      // BASE_URL: remove what the run added to someone else's system.
      if (env.DATABASE_URL) {
        await removeRawWrites(env.DATABASE_URL, rawTarget).catch((error: unknown) =>
          say(`  removing raw writes failed: ${(error as Error).message}`),
        );
      }
      const token = await login(api, tenant.email, tenant.password).catch(
        () => tenant!.sessionToken,
      );
      await api
        .call("POST", "/database/delete", { token, query: { database_id: tenant.databaseId } })
        .catch((error: unknown) =>
          say(`  deleting the database failed: ${(error as Error).message}`),
        );
      if (createdOrganization) {
        await api
          .call("POST", "/organization/delete", {
            token,
            query: { organization_id: tenant.organizationId },
          })
          .catch((error: unknown) =>
            say(`  deleting the organization failed: ${(error as Error).message}`),
          );
      }
    }
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    const stopped = error instanceof Error && error.message === abortedWith;
    process.stderr.write(
      stopped
        ? `benchmark stopped: ${abortedWith}\n`
        : `benchmark failed: ${(error as Error).stack ?? error}\n`,
    );
    process.exit(1);
  },
);
