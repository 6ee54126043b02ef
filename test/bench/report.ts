import { mkdir, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";

import type { Measured } from "./load.js";
import type { CpuShares, RssPeaks } from "./process-sampler.js";
import type { StreamLatency } from "./stream-latency.js";
import type { WebhookDelivery } from "./webhook-delivery.js";

/** One line of `latest.json` (the keys issue 9 names). */
export interface ScenarioResult {
  name: string;
  rps: number;
  p50_ms: number;
  p99_ms: number;
  errors: number;
  /** The same statements straight against PostgreSQL; null when there was no database access. */
  raw_rps: number | null;
  /** rps / raw_rps. */
  ratio: number | null;
}

/** What the processes used during one scenario (printed, not in the JSON). */
export interface ScenarioUsage {
  rss: RssPeaks;
  cpu: CpuShares;
  /** The busiest other processes of the machine meanwhile, by command name. */
  others: CpuShares;
  /** CPU during the raw-postgres run of the scenario (this process and the machine). */
  rawCpu?: CpuShares;
  rawOthers?: CpuShares;
}

export interface Summary {
  date: string;
  machine: string;
  /** How this run was made (not in the issue's list; it tells a --quick file from a full one). */
  options: {
    quick: boolean;
    records: number;
    seconds: number;
    connections: number;
    target: string;
  };
  scenarios: ScenarioResult[];
  /** A change stream's latency measured next to the single creates (stream-latency.ts). */
  stream_latency?: StreamLatency;
  /** A webhook on the benchmark table next to the creates (webhook-delivery.ts), per scenario. */
  webhook_delivery?: WebhookDelivery[];
  rss_mb: RssPeaks;
}

/** The stream probe's result as one line of the report. */
export function streamLatencyLine(latency: StreamLatency): string {
  return `change stream next to create one: a change's event ${cell(latency.p50_ms, 1)} ms (p50), ${cell(latency.p99_ms, 1)} ms (p99), ${cell(latency.max_ms, 1)} ms (max) after its write's answer, over ${latency.changes} changes${latency.missing > 0 ? `; ${latency.missing} never came` : ""}`;
}

/** A webhook probe's result as one line of the report. */
export function webhookDeliveryLine(d: WebhookDelivery): string {
  return `webhook next to ${d.scenario}: ${cell(d.per_second, 0)} deliveries/s (${d.deliveries} in ${d.seconds} s); a change delivered ${cell(d.p50_ms, 1)} ms (p50), ${cell(d.p99_ms, 1)} ms (p99), ${cell(d.max_ms, 1)} ms (max) after its write's answer, over ${d.changes} probe writes${d.missing > 0 ? `; ${d.missing} not delivered within 10 s` : ""}`;
}

export function describeMachine(postgresVersion: string | undefined): string {
  const cpus = os.cpus();
  const memory = (os.totalmem() / 2 ** 30).toFixed(0);
  return [
    `${cpus.length} x ${cpus[0]?.model.trim() ?? "cpu"}`,
    `${memory} GiB`,
    `${os.type()} ${os.release()}`,
    `Node ${process.version}`,
    postgresVersion ? `PostgreSQL ${postgresVersion}` : undefined,
  ]
    .filter(Boolean)
    .join(", ");
}

export const round = (value: number, digits: number) => {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
};

export async function writeSummary(file: string, summary: Summary): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, `${JSON.stringify(summary, null, 2)}\n`);
}

const cell = (value: number | null, digits = 1) =>
  value === null ? "-" : value.toLocaleString("en-US", { maximumFractionDigits: digits });

/** The summary as Markdown: the scenarios, the memory of each process, where the CPU went. */
export function markdown(summary: Summary, usage: Map<string, ScenarioUsage>): string {
  const lines = [
    `Rowbase benchmark, ${summary.date}${summary.options.quick ? " (--quick)" : ""}: ${summary.options.records.toLocaleString("en-US")} records, ${summary.options.connections} connections, ${summary.options.seconds} s per scenario, ${summary.options.target}`,
    `Machine: ${summary.machine}`,
    "",
    "| scenario | req/s | p50 ms | p99 ms | errors | raw-postgres ops/s | rowbase / raw |",
    "|---|---:|---:|---:|---:|---:|---:|",
    ...summary.scenarios.map(
      (s) =>
        `| ${s.name} | ${cell(s.rps)} | ${cell(s.p50_ms, 2)} | ${cell(s.p99_ms, 2)} | ${s.errors} | ${cell(s.raw_rps)} | ${cell(s.ratio, 3)} |`,
    ),
  ];
  const batch = summary.scenarios.find((s) => s.name.startsWith("batch create"));
  if (batch) {
    lines.push(
      "",
      `batch create: ${cell(batch.rps * 1000, 0)} records/s (raw-postgres: ${batch.raw_rps === null ? "-" : cell(batch.raw_rps * 1000, 0)})`,
    );
  }
  if (summary.stream_latency) lines.push("", streamLatencyLine(summary.stream_latency));
  for (const delivered of summary.webhook_delivery ?? []) {
    lines.push("", webhookDeliveryLine(delivered));
  }
  const processes = Object.keys(summary.rss_mb);
  if (processes.length > 0) {
    lines.push(
      "",
      `| peak RSS (MiB) | ${processes.join(" | ")} |`,
      `|---|${processes.map(() => "---:").join("|")}|`,
      `| whole run (VmHWM) | ${processes.map((p) => cell(summary.rss_mb[p] ?? null, 0)).join(" | ")} |`,
      ...[...usage].map(
        ([name, used]) =>
          `| ${name} | ${processes.map((p) => cell(used.rss[p] ?? null, 0)).join(" | ")} |`,
      ),
    );
    const columns = [...processes, "postgres", "bench", "machine"];
    lines.push(
      "",
      `| CPU % of one core | ${columns.join(" | ")} | raw: postgres | raw: machine |`,
      `|---|${columns.map(() => "---:").join("|")}|---:|---:|`,
      ...[...usage].map(
        ([name, used]) =>
          `| ${name} | ${columns.map((p) => cell(used.cpu[p] ?? null, 0)).join(" | ")} | ${cell(used.rawCpu?.postgres ?? null, 0)} | ${cell(used.rawCpu?.machine ?? null, 0)} |`,
      ),
      "",
      `| CPU ms per request | ${[...processes, "postgres"].join(" | ")} | raw: postgres |`,
      `|---|${[...processes, "postgres"].map(() => "---:").join("|")}|---:|`,
      ...[...usage].map(([name, used]) => {
        const result = summary.scenarios.find((s) => s.name === name);
        const perRequest = (share: number | undefined, rate: number | null | undefined) =>
          cell(share === undefined || !rate ? null : (share * 10) / rate, 2);
        return `| ${name} | ${[...processes, "postgres"].map((p) => perRequest(used.cpu[p], result?.rps)).join(" | ")} | ${perRequest(used.rawCpu?.postgres, result?.raw_rps)} |`;
      }),
      "",
      "postgres = the backends serving the benchmark's database; bench = this process (autocannon " +
        "and the raw-postgres loops); machine = every core together " +
        `(${os.cpus().length * 100} % is all of them), whoever used them. CPU ms per request ` +
        "= CPU % / req/s x 10: it moves less than req/s with the machine's noise.",
    );
  }
  return `${lines.join("\n")}\n`;
}

const shares = (cpu: CpuShares) =>
  Object.entries(cpu)
    .map(([name, share]) => `${name} ${share}`)
    .join(", ");

/** What the run prints as each scenario ends. */
export function scenarioLines(
  result: ScenarioResult,
  measured: Measured,
  raw: Measured | undefined,
  used: ScenarioUsage | undefined,
): string[] {
  const lines = [
    `- ${result.name}: ${result.rps} req/s, p50 ${result.p50_ms} ms, p99 ${result.p99_ms} ms, ${result.errors} errors` +
      (raw
        ? ` | raw-postgres ${result.raw_rps} ops/s (p50 ${round(raw.p50_ms, 2)} ms, p99 ${round(raw.p99_ms, 2)} ms) | ratio ${result.ratio}`
        : ""),
  ];
  if (used) {
    let line = `    CPU % of one core: ${shares(used.cpu)}`;
    if (Object.keys(used.others).length > 0) line += ` (other processes: ${shares(used.others)})`;
    lines.push(line);
    if (used.rawCpu) {
      const { bench, postgres, machine } = used.rawCpu;
      let rawLine = `    during raw-postgres: ${shares({ bench: bench ?? 0, postgres: postgres ?? 0, machine: machine ?? 0 })}`;
      if (Object.keys(used.rawOthers ?? {}).length > 0) {
        rawLine += ` (other processes: ${shares(used.rawOthers ?? {})})`;
      }
      lines.push(rawLine);
    }
  }
  for (const detail of measured.errorDetail) lines.push(`    ${detail}`);
  if (raw && raw.errors > 0) {
    lines.push(`    raw-postgres: ${raw.errors} failed operations: ${raw.errorDetail.join("; ")}`);
  }
  return lines;
}
