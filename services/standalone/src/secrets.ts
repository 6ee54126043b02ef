import { randomBytes } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { generateSigningKey } from "@rowbase/identity";

/** Secrets of a development installation, generated on first start and kept in DATA_DIR. */
export interface LocalSecrets {
  internalJwtSecret: string;
  jwtSigningKeys: Awaited<ReturnType<typeof generateSigningKey>>[];
  postgresPassword: string;
}

export async function loadOrCreateSecrets(dataDir: string): Promise<LocalSecrets> {
  const file = path.join(dataDir, "secrets.json");
  try {
    return JSON.parse(await readFile(file, "utf8")) as LocalSecrets;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  const secrets: LocalSecrets = {
    internalJwtSecret: randomBytes(32).toString("base64url"),
    jwtSigningKeys: [await generateSigningKey()],
    postgresPassword: randomBytes(18).toString("base64url"),
  };
  await mkdir(dataDir, { recursive: true });
  await writeFile(file, JSON.stringify(secrets, null, 2), { mode: 0o600 });
  return secrets;
}
