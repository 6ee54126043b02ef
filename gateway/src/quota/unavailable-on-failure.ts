import { type Cache, Code, ConnectError, MemoryCache, RedisCache } from "@rowbase/kit";

/**
 * The shared cache as quota accounting uses it: a store that fails (Redis down) answers 503
 * `service_unavailable` through the error table, with the cause in the log. A quota that
 * cannot be counted is never a pass, and never a 500.
 */
export function unavailableOnFailure(cache: Cache): Cache {
  const guard = async <T>(operation: string, run: () => Promise<T>): Promise<T> => {
    try {
      return await run();
    } catch (error) {
      throw new ConnectError(
        `cache ${operation} failed`,
        Code.Unavailable,
        undefined,
        undefined,
        error,
      );
    }
  };
  return {
    kind: cache.kind,
    get: (key) => guard("get", () => cache.get(key)),
    set: (key, value, ttlSeconds) => guard("set", () => cache.set(key, value, ttlSeconds)),
    del: (...keys) => guard("del", () => cache.del(...keys)),
    addToExisting: (key, by) => guard("addToExisting", () => cache.addToExisting(key, by)),
    setIfAbsent: (key, value, ttlSeconds) =>
      guard("setIfAbsent", () => cache.setIfAbsent(key, value, ttlSeconds)),
    setVersioned: (key, version, value, ttlSeconds) =>
      guard("setVersioned", () => cache.setVersioned(key, version, value, ttlSeconds)),
    dropVersionedValues: (...keys) =>
      guard("dropVersionedValues", () => cache.dropVersionedValues(...keys)),
    close: () => cache.close(),
  };
}

/**
 * The shared cache as quota accounting uses it while Redis may fail: every operation that the
 * shared cache cannot do (a command fails, or the connection is known lost: no waiting for it)
 * is done in this replica's memory instead. Quotas then count per replica: the call that finds
 * a month's counter missing in memory rebuilds it from what Postgres holds (MonthlyUsageRebuild),
 * so each replica admits at most what is left of the allowance, never a free pass; cached plans
 * and owners are asked from their services again (the source of truth) and kept in memory.
 * Once the shared cache answers again, the memory is dropped, so that a later outage starts
 * from Postgres again rather than from counts that missed the time in between.
 */
export function localOnFailure(cache: Cache): Cache {
  let local = new MemoryCache();
  let usedLocal = false;
  const reachable = () => !(cache instanceof RedisCache) || cache.reachable;
  const run = async <T>(shared: () => Promise<T>, inMemory: (local: Cache) => Promise<T>) => {
    if (reachable()) {
      try {
        const answer = await shared();
        if (usedLocal) {
          usedLocal = false;
          const dropped = local;
          local = new MemoryCache();
          await dropped.close();
        }
        return answer;
      } catch {
        // Counted below, in memory.
      }
    }
    usedLocal = true;
    return inMemory(local);
  };
  return {
    kind: cache.kind,
    get: (key) =>
      run(
        () => cache.get(key),
        (m) => m.get(key),
      ),
    set: (key, value, ttl) =>
      run(
        () => cache.set(key, value, ttl),
        (m) => m.set(key, value, ttl),
      ),
    del: (...keys) =>
      run(
        () => cache.del(...keys),
        (m) => m.del(...keys),
      ),
    addToExisting: (key, by) =>
      run(
        () => cache.addToExisting(key, by),
        (m) => m.addToExisting(key, by),
      ),
    setIfAbsent: (key, value, ttl) =>
      run(
        () => cache.setIfAbsent(key, value, ttl),
        (m) => m.setIfAbsent(key, value, ttl),
      ),
    setVersioned: (key, version, value, ttl) =>
      run(
        () => cache.setVersioned(key, version, value, ttl),
        (m) => m.setVersioned(key, version, value, ttl),
      ),
    dropVersionedValues: (...keys) =>
      run(
        () => cache.dropVersionedValues(...keys),
        (m) => m.dropVersionedValues(...keys),
      ),
    close: () => cache.close(),
  };
}
