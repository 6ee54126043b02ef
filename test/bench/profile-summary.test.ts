import { describe, expect, it } from "vitest";
import { busyBySecond, type CpuProfile, summarize } from "./profile-summary.js";

const root = "/repo";
const frame = (functionName: string, url = "") => ({ functionName, url, lineNumber: 9 });

/**
 * (root) -> handle (the repository) -> parse (a package) -> parse again (recursion), and
 * (root) -> (idle). One sample every 250 ms: the first second busy in `parse`, the second idle
 * but for one sample of `handle`.
 */
const profile: CpuProfile = {
  nodes: [
    { id: 1, callFrame: frame("(root)"), children: [2, 5] },
    { id: 2, callFrame: frame("handle", "file:///repo/services/records/dist/a.js"), children: [3] },
    {
      id: 3,
      callFrame: frame("parse", "file:///repo/node_modules/@scope/lib/x.js"),
      children: [4],
    },
    { id: 4, callFrame: frame("parse", "file:///repo/node_modules/@scope/lib/x.js") },
    { id: 5, callFrame: frame("(idle)") },
  ],
  startTime: 0,
  endTime: 2_000_000,
  samples: [4, 4, 3, 2, 5, 5, 5, 2],
  timeDeltas: [0, 250_000, 250_000, 250_000, 250_000, 250_000, 250_000, 250_000],
};

describe("the CPU profile summary", () => {
  it("gives the busy share of each second", () => {
    expect(busyBySecond(profile)).toEqual([1, 0.25]);
  });

  it("splits a window's time by package and function, self and inclusive", () => {
    const summary = summarize(profile, {}, root);
    expect(summary.samples).toBe(8);
    expect(summary.idleShare).toBe(3 / 8);
    expect(summary.byPackage).toEqual([
      ["@scope/lib", 3 / 8],
      ["(idle)", 3 / 8],
      ["services/records", 2 / 8],
    ]);
    expect(summary.self[0]).toEqual(["parse @scope/lib/x.js:10", 3 / 8]);
    // The recursive parse counts once per sample; handle includes what it called.
    expect(Object.fromEntries(summary.inclusive)).toMatchObject({
      "handle services/records/dist/a.js:10": 5 / 8,
      "parse @scope/lib/x.js:10": 3 / 8,
    });
  });

  it("counts only the samples inside the window", () => {
    const summary = summarize(profile, { from: 1, to: 2 }, root);
    expect(summary.samples).toBe(4);
    expect(summary.byPackage).toEqual([
      ["(idle)", 3 / 4],
      ["services/records", 1 / 4],
    ]);
  });
});
