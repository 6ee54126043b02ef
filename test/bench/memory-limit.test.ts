import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { repoRoot } from "./local-system.js";
import { chartProcesses, createMemoryCgroups, quantityBytes } from "./memory-limit.js";

const run = promisify(execFile);

describe("the chart's process settings, as the benchmark reads them", () => {
  it("reads Kubernetes memory quantities", () => {
    expect(quantityBytes("512Mi")).toBe(512 * 2 ** 20);
    expect(quantityBytes("1Gi")).toBe(2 ** 30);
    expect(quantityBytes("1.5G")).toBe(1.5e9);
    expect(quantityBytes("134217728")).toBe(134217728);
    expect(() => quantityBytes("512MB")).toThrow(/unsupported memory quantity/);
  });

  it("gives every process its limit and NODE_OPTIONS, a process's own over the defaults", async () => {
    const processes = await chartProcesses(repoRoot());
    expect(Object.keys(processes).sort()).toEqual(
      ["catalog", "files", "gateway", "identity", "organization", "records", "webhooks"].sort(),
    );
    // serviceDefaults' limit, which no process overrides.
    for (const settings of Object.values(processes)) {
      expect(settings.memoryLimit).toBe(processes.identity.memoryLimit);
      expect(settings.memoryLimit).toBeGreaterThanOrEqual(128 * 2 ** 20);
    }
    // The busy processes get a larger young generation than V8 picks in 512 MiB.
    for (const piece of ["records", "gateway", "organization"] as const) {
      expect(processes[piece].nodeOptions).toMatch(/--max-semi-space-size=\d+/);
    }
    for (const piece of ["identity", "catalog", "files"] as const) {
      expect(processes[piece].nodeOptions).toBeUndefined();
    }
  });
});

describe("memory cgroups", () => {
  it("start a process that Node sees limited, or say why they cannot", async (ctx) => {
    const limit = 300 * 2 ** 20;
    const cgroups = await createMemoryCgroups({ records: limit }, `rowbase-test-${process.pid}`);
    if ("unavailable" in cgroups) {
      ctx.skip(`no memory cgroups here: ${cgroups.unavailable}`);
      return;
    }
    try {
      const script = "console.log(process.constrainedMemory())";
      const limited = cgroups.wrap("records", [process.execPath, "-e", script]);
      expect(Number((await run(limited.command, limited.args)).stdout)).toBe(limit);
      // A piece without a limit runs as it is.
      const free = cgroups.wrap("gateway", [process.execPath, "-e", script]);
      expect(free.command).toBe(process.execPath);
      expect(Number((await run(free.command, free.args)).stdout)).not.toBe(limit);
    } finally {
      await cgroups.remove();
    }
  });
});
