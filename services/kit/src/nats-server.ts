import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { freePort } from "./free-port.js";
import { type ServerProcess, serverProcess } from "./server-process.js";

/**
 * A NATS server with JetStream that a test owns: it can crash it and start it again on the same
 * port and store directory (the same streams and consumers), as a real outage would.
 */
export interface NatsServerProcess extends ServerProcess {
  /** `nats://127.0.0.1:<port>`, stable across restarts. */
  url: string;
  port: number;
  storeDir: string;
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
  const server = serverProcess(
    binary,
    ["-a", "127.0.0.1", "-p", String(port), "-js", "-sd", storeDir],
    () => answers(port),
  );
  await server.start();
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    storeDir,
    get running() {
      return server.running;
    },
    start: server.start,
    stop: server.stop,
    async close() {
      await server.stop();
      await rm(storeDir, { recursive: true, force: true });
    },
  };
}
