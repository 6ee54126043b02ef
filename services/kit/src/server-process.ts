import { type ChildProcess, spawn } from "node:child_process";

/** A server process that a test starts, kills and starts again with the same arguments. */
export interface ServerProcess {
  readonly running: boolean;
  /** Starts it unless running; resolves once `ready` says it answers. */
  start(): Promise<void>;
  /** Stops it, by default with SIGKILL (a crash: no goodbye to clients). */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * `binary args` as a child process, started once `ready` answers true (polled for up to 10 s;
 * its output goes into the error when it exits or does not answer by then).
 */
export function serverProcess(
  binary: string,
  args: string[],
  ready: () => Promise<boolean>,
): ServerProcess {
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();

  async function start() {
    if (child) return;
    const output: string[] = [];
    const spawned = spawn(binary, args, { stdio: ["ignore", "pipe", "pipe"] });
    spawned.stdout?.on("data", (chunk: Buffer) => output.push(chunk.toString()));
    spawned.stderr?.on("data", (chunk: Buffer) => output.push(chunk.toString()));
    let gone = false;
    exited = new Promise<void>((resolve) => {
      spawned.once("exit", () => {
        gone = true;
        resolve();
      });
      spawned.once("error", (error) => {
        gone = true;
        output.push(String(error));
        resolve();
      });
    });
    child = spawned;
    const deadline = Date.now() + 10_000;
    while (!(await ready())) {
      if (gone || Date.now() > deadline) {
        child = undefined;
        spawned.kill("SIGKILL");
        throw new Error(`${binary} ${args.join(" ")} did not start: ${output.join("")}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  return {
    get running() {
      return child !== undefined;
    },
    start,
    async stop(signal: NodeJS.Signals = "SIGKILL") {
      if (!child) return;
      child.kill(signal);
      await exited;
      child = undefined;
    },
  };
}
