import { type EntityManager, UniqueConstraintViolationException } from "@mikro-orm/postgresql";
import { Member } from "./entities.js";

/** Whether `error` is a unique violation of the named constraint or unique index. */
export function violates(error: unknown, constraint: string): boolean {
  return (
    error instanceof UniqueConstraintViolationException &&
    (error as { constraint?: string }).constraint === constraint
  );
}

/**
 * Serialises every change of how many organizations a user owns (create, owner transfer) until
 * the transaction ends, so that a count read after it cannot go stale before the commit.
 */
export async function lockOwnedOrganizations(em: EntityManager, userId: bigint): Promise<void> {
  await em.execute("select pg_advisory_xact_lock(hashtextextended(?, 0))", [
    `organization.owned:${userId}`,
  ]);
}

export async function ownedOrganizations(em: EntityManager, userId: bigint): Promise<number> {
  return em.count(Member, { userId, role: "owner" });
}
