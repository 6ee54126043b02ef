import { type Cache, Code, ConnectError } from "@rowbase/kit";

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
    incrBy: (key, by, ttlSeconds) => guard("incrBy", () => cache.incrBy(key, by, ttlSeconds)),
    setIfAbsent: (key, value, ttlSeconds) =>
      guard("setIfAbsent", () => cache.setIfAbsent(key, value, ttlSeconds)),
    close: () => cache.close(),
  };
}
