import { readFile } from "node:fs/promises";
import { relative } from "node:path";
import { parseArgs } from "node:util";

/**
 * Reads a V8 CPU profile that `--cpu-prof` wrote and says where the time went, as text: the
 * busy share second by second (to find a scenario in a profile of the whole run), then for a
 * window of it the time by package and by function, itself ("self") and with what it called
 * ("inclusive"). A profile covers the whole run, seeding included, so pick the scenario's
 * seconds from the timeline with `--from`/`--to`.
 *
 *   npx tsx test/bench/profile-summary.ts results/profiles/records-<time>.cpuprofile
 *   npx tsx test/bench/profile-summary.ts <file> --from 40 --to 60 --top 30
 */

/** The parts of a `.cpuprofile` (Chrome DevTools' format) this reads. */
export interface CpuProfile {
  nodes: {
    id: number;
    callFrame: { functionName: string; url: string; lineNumber: number };
    children?: number[];
  }[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface ProfileSummary {
  /** Samples in the window, and the share of them in `(idle)`. */
  samples: number;
  idleShare: number;
  /** Name and share of all samples of the window, largest first. */
  byPackage: [string, number][];
  self: [string, number][];
  inclusive: [string, number][];
}

const IDLE = new Set(["(idle)", "(program)"]);

/** Where a frame's code lives: an npm package, a file of the repository, or Node's own. */
function packageOf(url: string, functionName: string, root: string): string {
  if (!url) return functionName;
  const inModules = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (inModules) return inModules[1]!;
  if (url.startsWith("node:")) return url;
  const path = relative(root, url.replace(/^file:\/\//, ""));
  return path.split("/").slice(0, 2).join("/");
}

function frameName(url: string, functionName: string, line: number, root: string): string {
  const where = url.includes("node_modules/")
    ? url.replace(/.*node_modules\//, "")
    : url.startsWith("file://")
      ? relative(root, url.replace(/^file:\/\//, ""))
      : url;
  const name = functionName || "(anonymous)";
  return where ? `${name} ${where}:${line + 1}` : name;
}

/** The sample times in seconds from the profile's start. */
function sampleSeconds(profile: CpuProfile): number[] {
  const seconds: number[] = [];
  let at = profile.startTime;
  for (const delta of profile.timeDeltas) {
    at += delta;
    seconds.push((at - profile.startTime) / 1e6);
  }
  return seconds;
}

/** Busy share (not idle, not GC-free: GC counts as busy) per whole second of the profile. */
export function busyBySecond(profile: CpuProfile): number[] {
  const idle = new Set(
    profile.nodes.filter((n) => IDLE.has(n.callFrame.functionName)).map((n) => n.id),
  );
  const seconds = sampleSeconds(profile);
  const busy: number[] = [];
  const all: number[] = [];
  profile.samples.forEach((node, i) => {
    const second = Math.floor(seconds[i]!);
    all[second] = (all[second] ?? 0) + 1;
    if (!idle.has(node)) busy[second] = (busy[second] ?? 0) + 1;
  });
  return Array.from(all, (count, second) => (count ? (busy[second] ?? 0) / count : 0));
}

/** The time of `profile` between `from` and `to` seconds, by package and by function. */
export function summarize(
  profile: CpuProfile,
  window: { from?: number; to?: number } = {},
  root = process.cwd(),
): ProfileSummary {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes)
    for (const child of node.children ?? []) parent.set(child, node.id);
  const seconds = sampleSeconds(profile);
  const from = window.from ?? 0;
  const to = window.to ?? Number.POSITIVE_INFINITY;

  const hits = new Map<number, number>();
  let samples = 0;
  profile.samples.forEach((node, i) => {
    if (seconds[i]! < from || seconds[i]! > to) return;
    hits.set(node, (hits.get(node) ?? 0) + 1);
    samples += 1;
  });

  const add = (map: Map<string, number>, key: string, count: number) =>
    map.set(key, (map.get(key) ?? 0) + count);
  const byPackage = new Map<string, number>();
  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let idle = 0;
  for (const [id, count] of hits) {
    const { callFrame } = byId.get(id)!;
    if (callFrame.functionName === "(idle)") idle += count;
    const name = frameName(callFrame.url, callFrame.functionName, callFrame.lineNumber, root);
    add(self, name, count);
    add(byPackage, packageOf(callFrame.url, callFrame.functionName, root), count);
    // A recursive function counts once per sample.
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const frame = byId.get(at)!.callFrame;
      const caller = frameName(frame.url, frame.functionName, frame.lineNumber, root);
      if (seen.has(caller)) continue;
      seen.add(caller);
      add(inclusive, caller, count);
    }
  }
  const ranked = (map: Map<string, number>): [string, number][] =>
    [...map]
      .map(([key, count]): [string, number] => [key, samples ? count / samples : 0])
      .sort((a, b) => b[1] - a[1]);
  return {
    samples,
    idleShare: samples ? idle / samples : 0,
    byPackage: ranked(byPackage),
    self: ranked(self),
    inclusive: ranked(inclusive).filter(([name]) => name !== "(root)"),
  };
}

function percent(share: number): string {
  return `${(100 * share).toFixed(1).padStart(5)} %`;
}

function say(line: string): void {
  process.stdout.write(`${line}\n`);
}

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      from: { type: "string" },
      to: { type: "string" },
      top: { type: "string", default: "25" },
    },
  });
  const [file] = positionals;
  if (!file) {
    process.stderr.write(
      "usage: profile-summary.ts <file.cpuprofile> [--from s] [--to s] [--top n]\n",
    );
    process.exit(2);
  }
  const profile = JSON.parse(await readFile(file, "utf8")) as CpuProfile;
  const top = Number(values.top);
  say("busy share per second (GC included):");
  const timeline = busyBySecond(profile).map(
    (share, second) => `${second}s ${Math.round(100 * share)}%`,
  );
  for (let i = 0; i < timeline.length; i += 10) say(`  ${timeline.slice(i, i + 10).join("  ")}`);
  const summary = summarize(profile, {
    ...(values.from !== undefined ? { from: Number(values.from) } : {}),
    ...(values.to !== undefined ? { to: Number(values.to) } : {}),
  });
  say(
    `\nwindow ${values.from ?? 0}-${values.to ?? "end"} s: ${summary.samples} samples, idle ${percent(summary.idleShare).trim()}`,
  );
  for (const [title, rows] of [
    ["by package (self)", summary.byPackage],
    ["by function (self)", summary.self],
    ["by function (inclusive)", summary.inclusive],
  ] as const) {
    say(`\n${title}:`);
    for (const [name, share] of rows.slice(0, top)) say(`  ${percent(share)}  ${name}`);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
