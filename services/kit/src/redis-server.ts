import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import net from "node:net";
import { freePort } from "./free-port.js";

/**
 * A Redis server that a test owns (no persistence): it can kill it and start it again on the
 * same port, as an outage would, without touching the Redis other tests share.
 */
export interface RedisServerProcess {
  /** `redis://127.0.0.1:<port>`, stable across restarts. */
  url: string;
  port: number;
  readonly running: boolean;
  /** Starts it again (same port, empty); resolves once it answers. */
  start(): Promise<void>;
  /** Stops it, by default with SIGKILL (a crash: no goodbye to clients). */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/** Whether `PING` on the port answers `+PONG`. */
function pong(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: "127.0.0.1", port });
    const done = (answer: boolean) => {
      socket.destroy();
      resolve(answer);
    };
    socket.once("connect", () => socket.write("PING\r\n"));
    socket.once("data", (chunk: Buffer) => done(chunk.toString().startsWith("+PONG")));
    socket.once("error", () => done(false));
  });
}

/** `/usr/bin/redis-server` (Debian's package) when present, else `redis-server` on the PATH. */
function defaultBinary(): string {
  return existsSync("/usr/bin/redis-server") ? "/usr/bin/redis-server" : "redis-server";
}

/** Starts `redis-server` on a free loopback port, without persistence. */
export async function startRedisServer(
  options: { binary?: string } = {},
): Promise<RedisServerProcess> {
  const binary = options.binary ?? defaultBinary();
  const port = await freePort();
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();

  async function start() {
    if (child) return;
    const output: string[] = [];
    const spawned = spawn(
      binary,
      ["--bind", "127.0.0.1", "--port", String(port), "--save", "", "--appendonly", "no"],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
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
    while (!(await pong(port))) {
      if (gone || Date.now() > deadline) {
        child = undefined;
        spawned.kill("SIGKILL");
        throw new Error(`redis-server did not start on port ${port}: ${output.join("")}`);
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
    url: `redis://127.0.0.1:${port}`,
    port,
    get running() {
      return child !== undefined;
    },
    start,
    stop,
  };
}

/** Polls `condition` every 20 ms until it holds; fails after `ms`. */
export async function waitFor(condition: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
