import { readFileSync } from "node:fs";
import path from "node:path";
import { ConfigError, errorInfoOf, parseConfig, secret } from "@rowbase/kit";
import { z } from "zod";
import { runAdminCommand, UsageError } from "./admin-cli.js";

/** The operator's command line: `npm run admin -- set-plan <organization_id> <plan>`. */
const cliEnv = z.object({
  ORGANIZATION_GRPC_URL: z.url().default("http://127.0.0.1:50052"),
  INTERNAL_JWT_SECRET: secret.optional(),
  DATA_DIR: z.string().default(".rowbase"),
});

function localSecret(dataDir: string): string | undefined {
  try {
    return JSON.parse(readFileSync(path.join(dataDir, "secrets.json"), "utf8")).internalJwtSecret;
  } catch {
    return undefined;
  }
}

async function main() {
  const env = parseConfig(cliEnv, process.env);
  const internalSecret = env.INTERNAL_JWT_SECRET ?? localSecret(path.resolve(env.DATA_DIR));
  if (!internalSecret)
    throw new ConfigError(["INTERNAL_JWT_SECRET: required (no local installation found)"]);
  process.stdout.write(
    `${await runAdminCommand(process.argv.slice(2), { organizationUrl: env.ORGANIZATION_GRPC_URL, internalSecret })}\n`,
  );
}

main().catch((error: unknown) => {
  const reason = errorInfoOf(error)?.reason;
  process.stderr.write(`${reason ?? (error as Error).message}\n`);
  process.exit(error instanceof UsageError || error instanceof ConfigError || reason ? 2 : 1);
});
