import { existsSync } from "node:fs";
import net from "node:net";
import { freePort } from "./free-port.js";
import { type ServerProcess, serverProcess } from "./server-process.js";

/**
 * A Redis server that a test owns (no persistence): it can kill it and start it again on the
 * same port, empty, as an outage would, without touching the Redis other tests share.
 */
export interface RedisServerProcess extends ServerProcess {
  /** `redis://127.0.0.1:<port>`, stable across restarts. */
  url: string;
  port: number;
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
  const server = serverProcess(
    binary,
    ["--bind", "127.0.0.1", "--port", String(port), "--save", "", "--appendonly", "no"],
    () => pong(port),
  );
  await server.start();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    get running() {
      return server.running;
    },
    start: server.start,
    stop: server.stop,
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
