import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import { afterAll, beforeAll } from "vitest";
import { client } from "../../e2e/support/http.js";
import { RECORD_TEST_RATE_LIMITS } from "../../e2e/support/records.js";
import { StateProbe } from "./state.js";

export type Api = ReturnType<typeof client>;

export interface SecurityContext {
  sys: TestSystem;
  api: Api;
  state: StateProbe;
}

/**
 * One started system per test file (started in beforeAll, stopped in afterAll), with the rate
 * limits opened wide unless `env` says otherwise, and a state probe on its database and cache.
 * The gateway publishes usage right after each request (not summed over a second), so that a
 * settled snapshot holds the usage statistics of every request before it.
 */
export function securitySystem(env: Record<string, string> = {}): SecurityContext {
  const context = {} as SecurityContext;
  let restoreFetch: (() => void) | undefined;
  beforeAll(async () => {
    context.sys = await startTestSystem({
      RATE_LIMITS: RECORD_TEST_RATE_LIMITS,
      USAGE_FLUSH_MS: "0",
      ...env,
    });
    context.api = client(context.sys.baseUrl);
    context.state = await StateProbe.open(context.sys);
    // Every request to the gateway (client, raw uploads, signed downloads) may change the state,
    // so the probe must not reuse its last snapshot after one.
    const fetchBefore = globalThis.fetch;
    const gateway = context.sys.baseUrl;
    globalThis.fetch = (input, init) => {
      const url = input instanceof Request ? input.url : String(input);
      if (url.startsWith(gateway)) context.state.touch();
      return fetchBefore(input, init);
    };
    restoreFetch = () => {
      globalThis.fetch = fetchBefore;
    };
  });
  afterAll(async () => {
    restoreFetch?.();
    await context.state?.close();
    await context.sys?.stop();
  });
  return context;
}
