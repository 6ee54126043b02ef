import { readdir, readFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { type LocalSystem, startLocalSystem } from "../bench/local-system.js";
import type { Piece } from "../bench/pieces.js";
import { Api, random, recordData, recordsPath, seedTenant } from "../bench/seed.js";

const HELP = `npm run soak [-- options]

Starts Rowbase (each service and the gateway as its own process) against the PostgreSQL, Redis
and NATS of the tests, drives a steady mix of record, file and auth calls, samples every
process's RSS and open file descriptors, and fails on any error or on growth past the bounds
(see test/soak/README.md).

  --minutes N        how long the load runs (default 10)
  --rate N           operations per second, paced (default 20)
  --sample-seconds N seconds between samples (default 5)
  --source           run the processes from TypeScript sources (tsx) instead of dist/`;

const { values: args } = parseArgs({
  options: {
    minutes: { type: "string", default: "10" },
    rate: { type: "string", default: "20" },
    "sample-seconds": { type: "string", default: "5" },
    source: { type: "boolean", default: false },
    help: { type: "boolean", default: false },
  },
});

/**
 * The bounds, between the median of the first third of the samples and that of the last third,
 * per process. RSS moves with the garbage collector's heap sizing, so a growth counts only past
 * both an absolute and a relative margin; descriptors are sockets and files, which a steady load
 * keeps at a steady number.
 */
export const BOUNDS = { rssMiB: 48, rssShare: 0.25, fds: 16 };

const say = (line: string) => process.stdout.write(`${line}\n`);

interface Sample {
  at: number;
  rssKiB: number;
  fds: number;
}

async function sampleOf(pid: number): Promise<Sample | undefined> {
  try {
    const status = await readFile(`/proc/${pid}/status`, "utf8");
    const rss = /VmRSS:\s+(\d+) kB/.exec(status)?.[1];
    const fds = (await readdir(`/proc/${pid}/fd`)).length;
    return { at: Date.now(), rssKiB: Number(rss ?? 0), fds };
  } catch {
    return undefined;
  }
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
};

interface Failure {
  op: string;
  status: number | string;
  body: string;
}

async function main() {
  if (args.help) {
    say(HELP);
    return;
  }
  const minutes = Number(args.minutes);
  const rate = Number(args.rate);
  const sampleMs = Number(args["sample-seconds"]) * 1000;
  if (!(minutes > 0 && rate > 0 && sampleMs > 0)) throw new Error("bad options; see --help");

  say(`- soak: ${minutes} min at ${rate} operations/s, samples every ${sampleMs / 1000} s`);
  const system: LocalSystem = await startLocalSystem({
    source: args.source,
    logLevel: process.env.SOAK_LOG_LEVEL ?? "warn",
    say,
  });
  let ok = false;
  const stopping = async (reason: string) => {
    say(`!! ${reason}: stopping`);
    await system.stop({ keepLogs: true });
    process.exit(1);
  };
  process.once("SIGINT", () => void stopping("interrupted"));
  process.once("SIGTERM", () => void stopping("terminated"));
  try {
    const api = new Api(system.baseUrl);
    const tenant = await seedTenant(api, {
      records: 500,
      mail: system.mail,
      admin: {
        organizationUrl: system.organizationGrpcUrl,
        internalSecret: system.internalJwtSecret,
      },
      say,
    });
    const files = await api.call<{ table: { table_id: number }; fields: { field_id: number }[] }>(
      "POST",
      "/table/create",
      {
        token: tenant.sessionToken,
        query: { database_id: tenant.databaseId },
        body: { name: "Docs", fields: [{ name: "Doc", type: "file" }] },
      },
    );
    const fileFieldId = files.fields[0]!.field_id;
    const filesPath = recordsPath({ databaseId: tenant.databaseId, tableId: files.table.table_id });
    const fileRows = (
      await api.call<{ records: { row_id: number }[] }>("POST", `${filesPath}/batch`, {
        token: tenant.apiToken,
        body: { records: Array.from({ length: 20 }, () => ({ data: {} })) },
      })
    ).records.map((record) => record.row_id);

    const path = recordsPath(tenant);
    const live = [...tenant.rowIds];
    let created = 0;
    let deleted = 0;
    let session = tenant.sessionToken;
    const next = random(7);
    const pick = <T>(values: T[]) => values[Math.floor(next() * values.length)]!;
    const counts = new Map<string, number>();
    const failures: Failure[] = [];
    let failed = 0;

    const request = async (
      op: string,
      method: string,
      url: string,
      init: { token?: string; json?: unknown; form?: FormData } = {},
    ) => {
      const headers: Record<string, string> = {};
      if (init.token) headers.authorization = `Bearer ${init.token}`;
      if (init.json !== undefined) headers["content-type"] = "application/json";
      try {
        const response = await fetch(new URL(url, system.baseUrl), {
          method,
          headers,
          body: init.form ?? (init.json === undefined ? undefined : JSON.stringify(init.json)),
          signal: AbortSignal.timeout(30_000),
        });
        const text = await response.text();
        if (!response.ok) throw { status: response.status, body: text.slice(0, 300) };
        counts.set(op, (counts.get(op) ?? 0) + 1);
        if (!response.headers.get("content-type")?.startsWith("application/json")) return {};
        return (JSON.parse(text) as { data: Record<string, unknown> }).data;
      } catch (error) {
        failed++;
        const known = error as { status?: number; body?: string };
        if (failures.length < 20) {
          failures.push({
            op,
            status: known.status ?? "network",
            body: known.body ?? String((error as Error).message ?? error),
          });
        }
        return undefined;
      }
    };

    /** Row ids a get or patch in flight is using, with how many use each. */
    const inUse = new Map<number, number>();
    const using = async <T>(rowId: number, run: (rowId: number) => Promise<T>) => {
      inUse.set(rowId, (inUse.get(rowId) ?? 0) + 1);
      try {
        return await run(rowId);
      } finally {
        const left = (inUse.get(rowId) ?? 1) - 1;
        if (left > 0) inUse.set(rowId, left);
        else inUse.delete(rowId);
      }
    };

    let upload = 0;
    const operations: [number, () => Promise<unknown>][] = [
      [
        30,
        () =>
          request("list", "GET", `${path}?limit=25&offset=${Math.floor(next() * 400)}`, {
            token: tenant.apiToken,
          }),
      ],
      [
        25,
        () =>
          using(pick(live), (rowId) =>
            request("get", "GET", `${path}/${rowId}`, { token: tenant.apiToken }),
          ),
      ],
      [
        12,
        async () => {
          const data = await request("create", "POST", path, {
            token: tenant.apiToken,
            json: { data: recordData(100_000 + created, next) },
          });
          const rowId = (data?.record as { row_id?: number } | undefined)?.row_id;
          if (rowId !== undefined) {
            created++;
            live.push(rowId);
          }
        },
      ],
      [
        10,
        () =>
          using(pick(live), (rowId) =>
            request("patch", "PATCH", `${path}/${rowId}`, {
              token: tenant.apiToken,
              json: { data: { Amount: Math.round(next() * 10_000) } },
            }),
          ),
      ],
      [
        6,
        async () => {
          if (live.length <= 400) return;
          // Never one that a get or patch in flight is using: it would answer 404.
          const index = Math.floor(next() * live.length);
          if (inUse.has(live[index]!)) return;
          const [rowId] = live.splice(index, 1);
          const data = await request("delete", "DELETE", `${path}/${rowId}`, {
            token: tenant.apiToken,
          });
          if (data) deleted++;
          else live.push(rowId!);
        },
      ],
      [
        5,
        async () => {
          const rowId = pick(fileRows);
          const form = new FormData();
          const bytes = Buffer.alloc(1024 + Math.floor(next() * 64 * 1024), upload++ % 251);
          form.append("file", new Blob([bytes]), `soak-${upload}.bin`);
          const query = `row_id=${rowId}&field_id=${fileFieldId}`;
          if (
            await request("upload", "POST", `/file/upload?${query}`, {
              token: tenant.apiToken,
              form,
            })
          ) {
            await request("serve", "GET", `/file/serve?${query}`, { token: tenant.apiToken });
          }
        },
      ],
      [8, () => request("auth current", "GET", "/auth/current", { token: session })],
      [
        2,
        async () => {
          const data = await request("auth login", "POST", "/auth/login", {
            json: { email: tenant.email, password: tenant.password },
          });
          if (typeof data?.access_token === "string") session = data.access_token;
        },
      ],
      [2, () => request("health", "GET", "/health/ready")],
    ];
    const weight = operations.reduce((sum, [w]) => sum + w, 0);
    const choose = () => {
      let at = next() * weight;
      for (const [w, run] of operations) {
        at -= w;
        if (at < 0) return run;
      }
      return operations[0]![1];
    };

    const samples = new Map<Piece, Sample[]>();
    const sampleAll = async () => {
      for (const [piece, pid] of system.pids()) {
        const sample = await sampleOf(pid);
        if (!sample) continue;
        const list = samples.get(piece) ?? [];
        list.push(sample);
        samples.set(piece, list);
      }
    };

    say(`- load: ${minutes} min`);
    const started = Date.now();
    const end = started + minutes * 60_000;
    const inFlight = new Set<Promise<unknown>>();
    let issued = 0;
    let nextSample = started;
    let nextReport = started + 60_000;
    while (Date.now() < end) {
      const now = Date.now();
      if (now >= nextSample) {
        nextSample += sampleMs;
        await sampleAll();
      }
      if (now >= nextReport) {
        nextReport += 60_000;
        const line = [...samples.entries()]
          .map(([piece, list]) => {
            const last = list.at(-1)!;
            return `${piece} ${Math.round(last.rssKiB / 1024)}M/${last.fds}fd`;
          })
          .join(", ");
        say(
          `  ${Math.round((now - started) / 60_000)} min: ${issued} ops, ${failed} failed; ${line}`,
        );
      }
      // Paced: the operation due at this instant starts now, whatever the ones before do (at
      // most 64 in flight, so a stalled system shows as errors rather than unbounded memory).
      const due = started + (issued * 1000) / rate;
      if (due > now) {
        await new Promise((resolve) => setTimeout(resolve, Math.min(due - now, 50)));
        continue;
      }
      if (inFlight.size >= 64) {
        await Promise.race(inFlight);
        continue;
      }
      issued++;
      const run = choose()().finally(() => inFlight.delete(run));
      inFlight.add(run);
    }
    await Promise.all(inFlight);
    await sampleAll();

    // Every acknowledged create is there and every acknowledged delete is gone.
    const listed = await request("final count", "GET", `${path}?limit=1`, {
      token: tenant.apiToken,
    });
    const total = (listed as { total?: number } | undefined)?.total;
    const expected = tenant.rowIds.length + created - deleted;

    say(`\n- ${issued} operations in ${minutes} min, ${failed} failed`);
    say(`  ${[...counts.entries()].map(([op, n]) => `${op} ${n}`).join(", ")}`);
    say(
      `  records: ${total} listed, ${expected} expected (${created} created, ${deleted} deleted)`,
    );
    const problems: string[] = [];
    if (failed > 0) problems.push(`${failed} operations failed`);
    for (const failure of failures) say(`    ${failure.op}: ${failure.status} ${failure.body}`);
    if (total !== expected) problems.push(`the table holds ${total} records, ${expected} expected`);
    say("\n| process | RSS MiB first third | last third | growth | fds first | last | growth |");
    say("|---|---:|---:|---:|---:|---:|---:|");
    for (const [piece, list] of samples) {
      const third = Math.max(1, Math.floor(list.length / 3));
      const first = list.slice(0, third);
      const last = list.slice(-third);
      const rss0 = median(first.map((s) => s.rssKiB)) / 1024;
      const rss1 = median(last.map((s) => s.rssKiB)) / 1024;
      const fd0 = median(first.map((s) => s.fds));
      const fd1 = median(last.map((s) => s.fds));
      say(
        `| ${piece} | ${rss0.toFixed(0)} | ${rss1.toFixed(0)} | ${(rss1 - rss0).toFixed(0)} | ${fd0} | ${fd1} | ${fd1 - fd0} |`,
      );
      if (rss1 - rss0 > BOUNDS.rssMiB && rss1 > rss0 * (1 + BOUNDS.rssShare)) {
        problems.push(`${piece} RSS grew from ${rss0.toFixed(0)} to ${rss1.toFixed(0)} MiB`);
      }
      if (fd1 - fd0 > BOUNDS.fds)
        problems.push(`${piece} open descriptors grew from ${fd0} to ${fd1}`);
    }
    if (problems.length > 0) {
      say(`\nFAILED: ${problems.join("; ")}`);
      say(`logs: ${system.logsDir}`);
    } else {
      say("\nPASSED");
      ok = true;
    }
  } finally {
    await system.stop({ keepLogs: !ok });
  }
  process.exit(ok ? 0 : 1);
}

main().catch((error: unknown) => {
  say(`soak failed: ${(error as Error).stack ?? error}`);
  process.exit(1);
});
