import { mkdir, readFile, rmdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { parse } from "yaml";
import { PIECES, type Piece } from "./pieces.js";

/** What the chart gives one process that the benchmark mirrors. */
export interface ChartProcess {
  /** `resources.limits.memory` in bytes, where one is set. */
  memoryLimit?: number;
  /** `env.NODE_OPTIONS`, where one is set. */
  nodeOptions?: string;
}

/**
 * The chart's memory limit and NODE_OPTIONS of each piece: its own section's, else
 * `serviceDefaults`' (a process's `env` is merged over the defaults' key by key). Node sizes
 * V8's heap from the memory its cgroup allows (a 512 MiB container gets a ~256 MiB old
 * generation and ~2 MiB semi-spaces, a 24 GiB machine 4 GiB and 32 MiB), so a process measured
 * without its limit and options is not the process a pod runs.
 */
export async function chartProcesses(root: string): Promise<Record<Piece, ChartProcess>> {
  const values = parse(await readFile(path.join(root, "helm/rowbase/values.yaml"), "utf8"));
  interface Section {
    // YAML reads a limit given in plain bytes as a number.
    resources?: { limits?: { memory?: string | number } };
    env?: Record<string, unknown>;
  }
  const defaults = values.serviceDefaults as Section;
  const processes = {} as Record<Piece, ChartProcess>;
  for (const piece of PIECES) {
    const own = (values[piece] ?? {}) as Section;
    const memory = own.resources?.limits?.memory ?? defaults.resources?.limits?.memory;
    const nodeOptions = own.env?.NODE_OPTIONS ?? defaults.env?.NODE_OPTIONS;
    processes[piece] = {
      ...(memory === undefined ? {} : { memoryLimit: quantityBytes(String(memory)) }),
      ...(nodeOptions === undefined ? {} : { nodeOptions: String(nodeOptions) }),
    };
  }
  return processes;
}

const UNITS: Record<string, number> = {
  "": 1,
  K: 1e3,
  M: 1e6,
  G: 1e9,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
};

/** A Kubernetes memory quantity (`512Mi`, `1G`, `134217728`) in bytes. */
export function quantityBytes(quantity: string): number {
  const match = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|K|M|G)?$/.exec(quantity.trim());
  if (!match) throw new Error(`unsupported memory quantity ${JSON.stringify(quantity)}`);
  return Math.round(Number(match[1]) * UNITS[match[2] ?? ""]!);
}

/** Memory cgroups the benchmark made, one per piece, like a pod's container limit. */
export interface MemoryCgroups {
  /** What the report says: where the cgroups are. */
  readonly where: string;
  /** The command that starts `argv` inside the piece's cgroup (the pid stays the process's). */
  wrap(piece: Piece, argv: string[]): { command: string; args: string[] };
  /** Removes the cgroups; their processes must have exited. */
  remove(): Promise<void>;
}

/**
 * A memory cgroup per piece under this process's own, limited to `limits` (cgroup v2
 * `memory.max`, or v1 `memory.limit_in_bytes`), or the reason there are none: cgroups are
 * writable only by root on most machines, and not at all in many containers.
 */
export async function createMemoryCgroups(
  limits: Partial<Record<Piece, number>>,
  name: string,
): Promise<MemoryCgroups | { unavailable: string }> {
  let own: { dir: string; limitFile: string; procsFile: string };
  try {
    own = await ownMemoryCgroup();
  } catch (error) {
    return { unavailable: (error as Error).message };
  }
  const parent = path.join(own.dir, name);
  const made: string[] = [];
  const remove = async () => {
    for (const dir of made.reverse()) await rmdir(dir).catch(() => {});
  };
  try {
    await mkdir(parent);
    made.push(parent);
    for (const [piece, bytes] of Object.entries(limits)) {
      const dir = path.join(parent, piece);
      await mkdir(dir);
      made.push(dir);
      await writeFile(path.join(dir, own.limitFile), String(bytes));
    }
  } catch (error) {
    await remove();
    return { unavailable: `cannot make memory cgroups in ${own.dir}: ${(error as Error).message}` };
  }
  return {
    where: parent,
    wrap(piece, argv) {
      if (limits[piece] === undefined) {
        const [command = "", ...args] = argv;
        return { command, args };
      }
      // The shell joins the cgroup and then becomes the process (same pid, same IPC channel).
      return {
        command: "/bin/sh",
        args: [
          "-c",
          'echo $$ > "$0" && exec "$@"',
          path.join(parent, piece, own.procsFile),
          ...argv,
        ],
      };
    },
    remove,
  };
}

/** This process's memory cgroup directory, from /proc/self/cgroup (v1 or v2). */
async function ownMemoryCgroup() {
  const lines = (await readFile("/proc/self/cgroup", "utf8")).trim().split("\n");
  const v1 = lines
    .map((line) => line.split(":"))
    .find(([, controllers]) => controllers?.split(",").includes("memory"));
  if (v1?.[2] !== undefined) {
    return {
      dir: path.join("/sys/fs/cgroup/memory", v1[2]),
      limitFile: "memory.limit_in_bytes",
      procsFile: "cgroup.procs",
    };
  }
  const v2 = lines.map((line) => line.split(":")).find(([id]) => id === "0");
  if (v2?.[2] !== undefined) {
    const dir = path.join("/sys/fs/cgroup", v2[2]);
    const controllers = await readFile(path.join(dir, "cgroup.controllers"), "utf8");
    if (!controllers.split(/\s+/).includes("memory")) {
      throw new Error(`the memory controller is not enabled in ${dir}`);
    }
    return { dir, limitFile: "memory.max", procsFile: "cgroup.procs" };
  }
  throw new Error("no memory cgroup in /proc/self/cgroup");
}
