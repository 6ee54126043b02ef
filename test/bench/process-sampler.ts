import { readdir, readFile } from "node:fs/promises";
import os from "node:os";

/** MiB by process name (as `ps` and Kubernetes `Mi` count). */
export interface RssPeaks {
  [process: string]: number;
}

/**
 * Per cent of one core by process name, plus `bench` (this process), `postgres` (the backends of
 * the run's database) and `machine` (every core, whoever used it).
 */
export interface CpuShares {
  [process: string]: number;
}

/** Linux counts CPU time in clock ticks of 1/100 s (`getconf CLK_TCK`). */
const TICKS_PER_SECOND = 100;

async function statusOf(pid: number): Promise<{ rssKb: number; hwmKb: number } | undefined> {
  try {
    const status = await readFile(`/proc/${pid}/status`, "utf8");
    const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(status)?.[1]);
    return { rssKb: kb("VmRSS"), hwmKb: kb("VmHWM") };
  } catch {
    return undefined;
  }
}

/** utime + stime of a process, in seconds. */
async function cpuSecondsOf(pid: number): Promise<number | undefined> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, "utf8");
    // The fields after the command name (which may hold spaces) start at state, field 3.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}

/** CPU seconds of every process on the machine, with its command name, by pid. */
async function everyProcess(): Promise<Map<number, { comm: string; seconds: number }>> {
  const all = new Map<number, { comm: string; seconds: number }>();
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = await readFile(`/proc/${entry}/stat`, "utf8");
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      all.set(Number(entry), {
        comm,
        seconds: (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND,
      });
    } catch {
      // It ended meanwhile.
    }
  }
  return all;
}

/** Busy and total seconds of every core together, from /proc/stat. */
async function machineSeconds(): Promise<{ busy: number; total: number }> {
  const line = (await readFile("/proc/stat", "utf8")).split("\n")[0]!;
  const [, ...ticks] = line.trim().split(/\s+/).map(Number);
  const total = ticks.reduce((sum, t) => sum + t, 0);
  const idle = (ticks[3] ?? 0) + (ticks[4] ?? 0);
  return { busy: (total - idle) / TICKS_PER_SECOND, total: total / TICKS_PER_SECOND };
}

interface CpuMark {
  at: number;
  processes: Map<string, number>;
  /** CPU seconds of each PostgreSQL backend serving the run's database, by pid. */
  backends: Map<number, number>;
  everyone: Map<number, { comm: string; seconds: number }>;
  bench: number;
  machine: { busy: number; total: number };
}

/**
 * Watches the processes of the run: resident memory sampled every `intervalMs` (VmRSS) and the
 * kernel's high-water mark (VmHWM, which catches peaks between samples), and CPU time per window
 * (one window per scenario), to show where the cores went.
 */
export class ProcessSampler {
  private timer: NodeJS.Timeout | undefined;
  private windowPeaks = new Map<string, number>();
  private readonly overall = new Map<string, number>();
  private mark: CpuMark | undefined;

  /** The PostgreSQL backends of the run's database (pg_stat_activity), once it is reachable. */
  backendPids: (() => Promise<number[]>) | undefined;

  constructor(
    private readonly pids: () => Map<string, number>,
    private readonly intervalMs = 250,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.sample(), this.intervalMs);
    this.timer.unref();
  }

  async sample(): Promise<void> {
    for (const [name, pid] of this.pids()) {
      const status = await statusOf(pid);
      if (!status) continue;
      const rss = status.rssKb / 1024;
      const hwm = Math.max(status.hwmKb, status.rssKb) / 1024;
      this.windowPeaks.set(name, Math.max(this.windowPeaks.get(name) ?? 0, rss));
      this.overall.set(name, Math.max(this.overall.get(name) ?? 0, hwm));
    }
  }

  private async cpuMark(): Promise<CpuMark> {
    const processes = new Map<string, number>();
    for (const [name, pid] of this.pids()) {
      const seconds = await cpuSecondsOf(pid);
      if (seconds !== undefined) processes.set(name, seconds);
    }
    const backends = new Map<number, number>();
    for (const pid of (await this.backendPids?.().catch(() => [])) ?? []) {
      const seconds = await cpuSecondsOf(pid);
      if (seconds !== undefined) backends.set(pid, seconds);
    }
    const usage = process.cpuUsage();
    return {
      at: performance.now(),
      processes,
      backends,
      everyone: await everyProcess(),
      bench: (usage.user + usage.system) / 1e6,
      machine: await machineSeconds(),
    };
  }

  /** Starts a window: memory peaks and CPU time are counted from now. */
  async begin(): Promise<void> {
    await this.sample();
    this.windowPeaks = new Map();
    this.mark = await this.cpuMark();
  }

  /**
   * Ends the window: its memory peaks (sampled VmRSS), CPU shares, and the other processes of
   * the machine that used the most CPU meanwhile (Redis, NATS, other work), by command name.
   */
  async end(): Promise<{ rss: RssPeaks; cpu: CpuShares; others: CpuShares }> {
    await this.sample();
    const rss = Object.fromEntries([...this.windowPeaks].map(([k, v]) => [k, round(v)]));
    const cpu: CpuShares = {};
    const others: CpuShares = {};
    const start = this.mark;
    if (start) {
      const now = await this.cpuMark();
      const elapsed = (now.at - start.at) / 1000;
      for (const [name, seconds] of now.processes) {
        const before = start.processes.get(name);
        if (before !== undefined) cpu[name] = Math.round(((seconds - before) / elapsed) * 100);
      }
      cpu.bench = Math.round(((now.bench - start.bench) / elapsed) * 100);
      if (this.backendPids) {
        // A backend opened during the window counts whole: its life is (nearly) all in it.
        let seconds = 0;
        for (const [pid, used] of now.backends) seconds += used - (start.backends.get(pid) ?? 0);
        cpu.postgres = Math.round((seconds / elapsed) * 100);
      }
      const ours = new Set<number>([process.pid, ...this.pids().values(), ...now.backends.keys()]);
      const byComm = new Map<string, number>();
      for (const [pid, { comm, seconds }] of now.everyone) {
        if (ours.has(pid)) continue;
        const used = seconds - (start.everyone.get(pid)?.seconds ?? seconds);
        byComm.set(comm, (byComm.get(comm) ?? 0) + used);
      }
      for (const [comm, seconds] of [...byComm].sort((a, b) => b[1] - a[1]).slice(0, 4)) {
        const share = Math.round((seconds / elapsed) * 100);
        if (share >= 2) others[comm] = share;
      }
      const busy = now.machine.busy - start.machine.busy;
      const total = now.machine.total - start.machine.total;
      // All cores busy is 100 % per core: 200 % on two cores.
      cpu.machine = total > 0 ? Math.round((busy / total) * os.cpus().length * 100) : 0;
    }
    return { rss, cpu, others };
  }

  /** The peak of each process over the whole run (VmHWM). */
  async peaks(): Promise<RssPeaks> {
    await this.sample();
    return Object.fromEntries([...this.overall].map(([k, v]) => [k, round(v)]));
  }

  stop(): void {
    clearInterval(this.timer);
  }
}

const round = (mb: number) => Math.round(mb * 10) / 10;
