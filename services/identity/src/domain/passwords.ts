import { hash, verify } from "@node-rs/argon2";

/** argon2id with OWASP's minimum parameters: 19 MiB, 2 iterations, 1 lane. */
const OPTIONS = { memoryCost: 19_456, timeCost: 2, parallelism: 1 };

export function hashPassword(password: string): Promise<string> {
  return hash(password, OPTIONS);
}

/**
 * A hash of no one's password: verifying against it when the account does not exist costs the
 * same time as a real check, so the answer time does not reveal which e-mails are registered.
 */
const decoy = hash("decoy password that matches nothing", OPTIONS);

export async function verifyPassword(stored: string | null, password: string): Promise<boolean> {
  if (!stored) {
    await verify(await decoy, password).catch(() => false);
    return false;
  }
  return verify(stored, password).catch(() => false);
}
