import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { generateSigningKey } from "@rowbase/identity";
import { createLogger, type LogDestination, NatsBus, STREAMS } from "@rowbase/kit";
import {
  createTestDatabase,
  type MailCatcher,
  startMailCatcher,
  testInfra,
  uniqueName,
} from "@rowbase/kit/testing";
import { type RunningSystem, startSystem } from "@rowbase/standalone";

export interface TestSystem {
  baseUrl: string;
  mail: MailCatcher;
  system: RunningSystem;
  /** The private signing keys the identity service uses (to forge or expire tokens in tests). */
  signingKeys: Awaited<ReturnType<typeof generateSigningKey>>[];
  databaseUrl: string;
  internalJwtSecret: string;
  /**
   * Where the files service keeps bytes: FILES_DIR when the test sets it, else a directory of
   * this system's own, removed at `stop`.
   */
  filesDir: string;
  stop(): Promise<void>;
}

/** Permissive limits for tests that are not about rate limiting. */
export const RELAXED_RATE_LIMITS = [
  "auth_login_ip=10000/60",
  "auth_login_email=10000/60",
  "auth_register_ip=10000/60",
  "auth_resend_ip=10000/60",
  "auth_verify_ip=10000/60",
  "auth_refresh_ip=10000/60",
].join(",");

/**
 * The whole of Rowbase on free ports against the real PostgreSQL (a fresh database), Redis (a
 * fresh key prefix) and NATS (fresh stream names), with a real SMTP server catching the mail.
 * With `logs`, every process writes its log lines there, at info level.
 */
export async function startTestSystem(
  env: Record<string, string> = {},
  options: { logs?: LogDestination } = {},
): Promise<TestSystem> {
  const infra = await testInfra();
  const database = await createTestDatabase(infra.databaseUrl);
  const mail = await startMailCatcher();
  const signingKeys = [await generateSigningKey()];
  const internalJwtSecret = randomBytes(32).toString("base64url");
  const filesDir = await mkdtemp(path.join(os.tmpdir(), "rowbase-files-"));
  const system = await startSystem({
    env: { SMTP_URL: mail.url, RATE_LIMITS: RELAXED_RATE_LIMITS, ...env },
    databaseUrl: database.url,
    redisUrl: infra.redisUrl,
    natsUrl: infra.natsUrl,
    internalJwtSecret,
    fileUrlSecret: randomBytes(32).toString("base64url"),
    filesDir,
    jwtSigningKeys: JSON.stringify(signingKeys),
    port: 0,
    logger: createLogger(
      "e2e",
      options.logs ? "info" : (process.env.TEST_LOG_LEVEL ?? "silent"),
      options.logs,
    ),
    logDestination: options.logs,
    namespace: uniqueName("e2e"),
  });
  return {
    baseUrl: `http://127.0.0.1:${system.port}`,
    mail,
    system,
    signingKeys,
    databaseUrl: database.url,
    internalJwtSecret,
    filesDir: env.FILES_DIR ?? filesDir,
    async stop() {
      // The namespaced streams of this run are of no use to anyone once it is over.
      if (system.bus instanceof NatsBus) await system.bus.deleteStreams(STREAMS.map((s) => s.name));
      await system.stop();
      await mail.close();
      await database.drop();
      await rm(filesDir, { recursive: true, force: true });
    },
  };
}
