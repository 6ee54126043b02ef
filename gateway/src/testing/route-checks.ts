import { afterAll, beforeAll, expect } from "vitest";
import type { Route } from "../routing/route.js";
import { type RouteHarness, startRouteHarness } from "./route-harness.js";

/**
 * For the route tests: the checks that every family of routes behind a service client pointed
 * at a closed port shares. A request that passes the gateway's checks shows up as 503 (the
 * call was made); answers of the running service are the e2e tests' job.
 */

/** A request that passes validation: method, path with its query, and JSON body. */
export type ValidRequest = [method: string, path: string, json?: unknown];

/** A request refused before the service call, with the `extra` of its validation envelope. */
export type RefusedRequest = [method: string, path: string, json: unknown, extra: unknown[]];

/** The message of an id query parameter that is no JavaScript-safe positive integer. */
export const ID_MESSAGE = "must be an integer between 1 and 9007199254740991";

/** The body of a 400 for `method path` (the validation envelope). */
export const validation = (method: string, path: string, extra: unknown[]) => ({
  status_code: 400,
  detail: `Validation failed for ${method} ${path}`,
  extra,
});

/**
 * A family of routes under test: `routeSuite` starts its harness before the tests of the
 * calling `describe` and closes it after them, and its checks run against the family's
 * requests that pass validation.
 */
export class RouteSuite {
  harness!: RouteHarness;
  /** A session of user 42. */
  session!: string;

  constructor(private readonly valid: ValidRequest[]) {}

  /**
   * The routes are exactly those the valid requests reach; each takes a session only, except
   * `tokenReads` (`GET /path`), which take an API token as well.
   */
  expectSessionRoutes(routes: Route[], tokenReads: string[] = []): void {
    expect(routes.map((route) => `${route.method} ${route.path}`).sort()).toEqual(
      [...new Set(this.valid.map(([method, path]) => `${method} ${path.split("?")[0]}`))].sort(),
    );
    for (const route of routes) {
      const name = `${route.method} ${route.path}`;
      const auth = tokenReads.includes(name) ? "session_or_token" : "session";
      expect({ name, auth: route.auth }).toEqual({ name, auth });
    }
  }

  /**
   * Every route answers 401 without a session, and to an API token unless it is one of
   * `tokenReads` (`GET /path`); `WWW-Authenticate` says why. A POST sends `badBody`, which does
   * not validate: authentication comes first.
   */
  async expectUnauthorized(badBody: unknown, tokenReads: string[] = []): Promise<void> {
    for (const [method, path] of this.valid) {
      const reads = tokenReads.includes(`${method} ${path.split("?")[0]}`);
      const cases: [string | undefined, RegExp][] = [
        [undefined, /^Bearer realm="rowbase", error_description=/],
      ];
      if (!reads)
        cases.push([
          `rb_${"a".repeat(40)}`,
          /error="invalid_token", error_description="API tokens are not accepted on this route/,
        ]);
      for (const [token, reason] of cases) {
        const response = await this.harness.request(method, path, {
          token,
          json: method === "POST" ? badBody : undefined,
        });
        expect({ method, path, token, status: response.status }).toEqual({
          method,
          path,
          token,
          status: 401,
        });
        expect(response.body).toEqual({ message: "unauthorized", data: {} });
        expect(response.headers.get("www-authenticate")).toMatch(reason);
      }
    }
  }

  /** Every valid request with a session calls the service, which is not running: 503. */
  async expectServiceCalled(): Promise<void> {
    for (const [method, path, json] of this.valid) {
      const response = await this.harness.request(method, path, { token: this.session, json });
      expect({ method, path, status: response.status, body: response.body }).toEqual({
        method,
        path,
        status: 503,
        body: { message: "service_unavailable", data: {} },
      });
    }
  }

  /** Every request with a session is refused with its validation envelope. */
  async expectRefused(refused: RefusedRequest[]): Promise<void> {
    for (const [method, path, json, extra] of refused) {
      const response = await this.harness.request(method, path, { token: this.session, json });
      expect({ path, status: response.status, body: response.body }).toEqual({
        path,
        status: 400,
        body: validation(method, path.split("?")[0] ?? path, extra),
      });
    }
  }
}

/** The suite of the routes that `routes` makes, `valid` listing a passing request of each. */
export function routeSuite(routes: () => Promise<Route[]>, valid: ValidRequest[] = []): RouteSuite {
  const suite = new RouteSuite(valid);
  beforeAll(async () => {
    suite.harness = await startRouteHarness(await routes());
    suite.session = await suite.harness.sessionToken(42n);
  });
  afterAll(async () => {
    await suite.harness.close();
  });
  return suite;
}
