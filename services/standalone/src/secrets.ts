import { randomBytes } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { generateSigningKey } from "@rowbase/identity";

/** Secrets of a development installation, generated on first start and kept in DATA_DIR. */
export interface LocalSecrets {
  internalJwtSecret: string;
  jwtSigningKeys: Awaited<ReturnType<typeof generateSigningKey>>[];
  postgresPassword: string;
  fileUrlSecret: string;
}

export async function loadOrCreateSecrets(dataDir: string): Promise<LocalSecrets> {
  const file = path.join(dataDir, "secrets.json");
  let stored: Partial<LocalSecrets> = {};
  try {
    stored = JSON.parse(await readFile(file, "utf8")) as Partial<LocalSecrets>;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  // Secrets added by later versions are generated next to the ones an installation already has.
  const secrets: LocalSecrets = {
    internalJwtSecret: stored.internalJwtSecret ?? randomBytes(32).toString("base64url"),
    jwtSigningKeys: stored.jwtSigningKeys ?? [await generateSigningKey()],
    postgresPassword: stored.postgresPassword ?? randomBytes(18).toString("base64url"),
    fileUrlSecret: stored.fileUrlSecret ?? randomBytes(32).toString("base64url"),
  };
  if (Object.keys(secrets).every((key) => key in stored)) return secrets;
  await mkdir(dataDir, { recursive: true });
  await writeFile(file, JSON.stringify(secrets, null, 2), { mode: 0o600 });
  return secrets;
}
