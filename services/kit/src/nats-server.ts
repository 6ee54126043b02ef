import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { freePort } from "./free-port.js";

/**
 * A NATS server with JetStream that a test owns: it can crash it and start it again on the same
 * port and store directory, as a real outage would.
 */
export interface NatsServerProcess {
  /** `nats://127.0.0.1:<port>`, stable across restarts. */
  url: string;
  port: number;
  storeDir: string;
  readonly running: boolean;
  /** Starts it again (same port, same stored streams and consumers); resolves once it answers. */
  start(): Promise<void>;
  /** Stops it, by default with SIGKILL (a crash: no goodbye to clients). */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Stops it if running and deletes its store. */
  close(): Promise<void>;
}

function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

/** `/usr/sbin/nats-server` (Debian's package) when present, else `nats-server` on the PATH. */
function defaultBinary(): string {
  return existsSync("/usr/sbin/nats-server") ? "/usr/sbin/nats-server" : "nats-server";
}

/** Starts `nats-server -js` on a free loopback port with a fresh store directory. */
export async function startNatsServer(
  options: { binary?: string } = {},
): Promise<NatsServerProcess> {
  const binary = options.binary ?? defaultBinary();
  const port = await freePort();
  const storeDir = await mkdtemp(path.join(tmpdir(), "rowbase-nats-"));
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();

  async function start() {
    if (child) return;
    const output: string[] = [];
    const spawned = spawn(binary, ["-a", "127.0.0.1", "-p", String(port), "-js", "-sd", storeDir], {
      stdio: ["ignore", "pipe", "pipe"],
    });
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
    while (!(await answers(port))) {
      if (gone || Date.now() > deadline) {
        child = undefined;
        spawned.kill("SIGKILL");
        throw new Error(`nats-server did not start on port ${port}: ${output.join("")}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  async function stop(signal: NodeJS.Signals = "SIGKILL") {
    if (!child) return;
    child.kill(signal);
    await exited;
    child = undefined;
  }

  await start();
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    storeDir,
    get running() {
      return child !== undefined;
    },
    start,
    stop,
    async close() {
      await stop();
      await rm(storeDir, { recursive: true, force: true });
    },
  };
}
