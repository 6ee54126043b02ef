import { type CallOptions, Code, ConnectError } from "@connectrpc/connect";
import { PRINCIPAL_HEADER, type Principal, verifyPrincipal } from "@rowbase/kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type { ApiTokenLookup } from "../auth/api-token-authenticator.js";
import { apiTokenSha256 } from "../auth/api-token-authenticator.js";
import type { ApiTokenCaller } from "../auth/authenticate.js";
import { DEFAULT_RATE_LIMITS, parseRateLimits } from "../rate-limit/rate-limit-settings.js";
import {
  HARNESS_INTERNAL_SECRET,
  type RouteHarness,
  startRouteHarness,
} from "../testing/route-harness.js";
import { type AuthMode, defineRoute, JsonText, type Route } from "./route.js";
import { routePipeline } from "./route-pipeline.js";

const READ_TOKEN = `rb_${"R".repeat(40)}`;
const WRITE_TOKEN = `rb_${"W".repeat(40)}`;

const readCaller: ApiTokenCaller = {
  kind: "api_token",
  tokenId: 11n,
  organizationId: 5n,
  access: "read",
};
const writeCaller: ApiTokenCaller = {
  kind: "api_token",
  tokenId: 12n,
  organizationId: 6n,
  access: "read_write",
};

/** The live tokens, by hash, as the organization service would resolve them; counts calls. */
function lookupOf(tokens: Record<string, ApiTokenCaller>) {
  const byHash = new Map(
    Object.entries(tokens).map(([token, caller]) => [
      apiTokenSha256(token).toString("hex"),
      caller,
    ]),
  );
  const state = {
    calls: 0,
    lookup: (async (sha256) => {
      state.calls += 1;
      return byHash.get(Buffer.from(sha256).toString("hex"));
    }) satisfies ApiTokenLookup,
  };
  return state;
}

/** A route that records the caller and call options the pipeline hands its handler. */
function probe<A extends AuthMode>(path: string, auth: A, rateLimits: Route["rateLimits"] = []) {
  const seen: { caller?: unknown; call?: CallOptions } = {};
  const route = defineRoute({
    method: "GET",
    path,
    operationId: `probe${path.replace(/\W/g, "_")}`,
    summary: "probe",
    tags: ["Test"],
    auth,
    rateLimits,
    async handle({ caller, call }) {
      seen.caller = caller;
      seen.call = call;
      return {};
    },
  });
  return { route, seen };
}

async function principalOf(call: CallOptions | undefined): Promise<Principal | undefined> {
  const header = new Headers(call?.headers).get(PRINCIPAL_HEADER);
  return header ? verifyPrincipal(HARNESS_INTERNAL_SECRET, header) : undefined;
}

const unauthorized = { message: "unauthorized", data: {} };

describe("route auth modes over HTTP", () => {
  const either = probe("/either", "session_or_token");
  const session = probe("/session", "session");
  const open = probe("/open", "none");
  const tokens = lookupOf({ [READ_TOKEN]: readCaller, [WRITE_TOKEN]: writeCaller });
  let harness: RouteHarness;

  beforeAll(async () => {
    harness = await startRouteHarness([either.route, session.route, open.route], {
      apiTokenLookup: tokens.lookup,
    });
  });

  afterAll(async () => {
    await harness.close();
  });

  it("session_or_token: an API token becomes the api_token principal passed on signed", async () => {
    const response = await harness.request("GET", "/either", { token: READ_TOKEN });
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ message: "success", data: {} });
    expect(either.seen.caller).toEqual(readCaller);
    expect(await principalOf(either.seen.call)).toEqual(readCaller);

    await harness.request("GET", "/either", { token: WRITE_TOKEN });
    expect(await principalOf(either.seen.call)).toEqual(writeCaller);
  });

  it("session_or_token: a session JWT becomes the user principal", async () => {
    const token = await harness.sessionToken(77n);
    const response = await harness.request("GET", "/either", { token });
    expect(response.status).toBe(200);
    const user = { kind: "user", userId: 77n, sessionId: "session-77" };
    expect(either.seen.caller).toEqual(user);
    expect(await principalOf(either.seen.call)).toEqual(user);
  });

  it("session_or_token: no, unknown or malformed credentials answer 401 unauthorized", async () => {
    for (const token of [
      undefined,
      `rb_${"x".repeat(40)}`,
      `rb_${"R".repeat(39)}`,
      "rb_",
      "junk",
    ]) {
      const response = await harness.request("GET", "/either", { token });
      expect({ token, status: response.status, body: response.body }).toEqual({
        token,
        status: 401,
        body: unauthorized,
      });
    }
  });

  it("session: an API token is refused 401 without being resolved", async () => {
    const before = tokens.calls;
    for (const token of [READ_TOKEN, WRITE_TOKEN]) {
      const response = await harness.request("GET", "/session", { token });
      expect(response.status).toBe(401);
      expect(response.body).toEqual(unauthorized);
    }
    expect(tokens.calls).toBe(before);
    const token = await harness.sessionToken(8n);
    expect((await harness.request("GET", "/session", { token })).status).toBe(200);
    expect(session.seen.caller).toEqual({ kind: "user", userId: 8n, sessionId: "session-8" });
  });

  it("none: no caller and no principal header, whatever is presented", async () => {
    const response = await harness.request("GET", "/open", { token: READ_TOKEN });
    expect(response.status).toBe(200);
    expect(open.seen.caller).toBeUndefined();
    expect(await principalOf(open.seen.call)).toBeUndefined();
  });
});

describe("rate limits by caller kind", () => {
  it("counts per-token limits per token and per-user limits per user", async () => {
    const settings = parseRateLimits("records_token=1/60,org_write_user=1/60");
    if (!settings.ok) throw new Error(settings.problems.join("; "));
    const tokenLimited = probe("/records", "session_or_token", ["records_token"]);
    const userLimited = probe("/org-write", "session", ["org_write_user"]);
    const tokens = lookupOf({ [READ_TOKEN]: readCaller, [WRITE_TOKEN]: writeCaller });
    const harness = await startRouteHarness([tokenLimited.route, userLimited.route], {
      rateLimits: settings.settings,
      apiTokenLookup: tokens.lookup,
    });
    try {
      const status = async (path: string, token: string) =>
        (await harness.request("GET", path, { token })).status;
      expect(await status("/records", READ_TOKEN)).toBe(200);
      const refused = await harness.request("GET", "/records", { token: READ_TOKEN });
      expect(refused.status).toBe(429);
      expect(refused.body).toEqual({ message: "too_many_requests", data: {} });
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
      expect(await status("/records", WRITE_TOKEN)).toBe(200);
      // A member's session is not a token: the per-token limit does not count it.
      const session = await harness.sessionToken(1n);
      expect(await status("/records", session)).toBe(200);
      expect(await status("/records", session)).toBe(200);

      expect(await status("/org-write", session)).toBe(200);
      expect(await status("/org-write", session)).toBe(429);
      expect(await status("/org-write", await harness.sessionToken(2n))).toBe(200);
    } finally {
      await harness.close();
    }
  });
});

describe("route definitions the pipeline refuses", () => {
  const deps = {} as Parameters<typeof routePipeline>[1];

  it("a per-token limit on a route that takes no API token", () => {
    for (const auth of ["none", "session"] as const) {
      expect(() => routePipeline(probe("/x", auth, ["records_token"]).route, deps)).toThrow(
        /per-token limits need API-token authentication/,
      );
    }
    expect(() =>
      routePipeline(probe("/x", "session_or_token", ["records_token"]).route, deps),
    ).not.toThrow();
  });

  it("a per-user limit on a route without authentication", () => {
    expect(() => routePipeline(probe("/x", "none", ["org_write_user"]).route, deps)).toThrow(
      /per-user limit needs an authenticated route/,
    );
    expect(() =>
      routePipeline(probe("/x", "session_or_token", ["org_write_user"]).route, deps),
    ).not.toThrow();
  });
});

describe("an API-token lookup that fails", () => {
  it("answers 503 service_unavailable, not 401", async () => {
    const route = probe("/either", "session_or_token").route;
    const harness = await startRouteHarness([route], {
      apiTokenLookup: async () => {
        throw new ConnectError("organization down", Code.Unavailable);
      },
    });
    try {
      const response = await harness.request("GET", "/either", { token: READ_TOKEN });
      expect(response.status).toBe(503);
      expect(response.body).toEqual({ message: "service_unavailable", data: {} });
    } finally {
      await harness.close();
    }
  });
});

// The defaults stay what docs/limits.md says for the limits these modes count.
it("keeps org_write_user at 30 per minute and records_token at 40 per 2 s", () => {
  expect(DEFAULT_RATE_LIMITS.org_write_user).toEqual({ points: 30, seconds: 60 });
  expect(DEFAULT_RATE_LIMITS.records_token).toEqual({ points: 40, seconds: 2 });
});

describe("answers made as JSON text", () => {
  // Text as the records service writes a record's data: sent on exactly, whitespace included.
  const text = '{"records":[{"data":{"Name":"a \\"quoted\\" </script>","n":1.50}}],"total":1}';
  const route = (raw: boolean) =>
    defineRoute({
      method: "GET",
      path: raw ? "/text-raw" : "/text",
      operationId: raw ? "textRaw" : "text",
      summary: "text",
      tags: ["Test"],
      auth: "none",
      raw,
      response: z.object({}).passthrough(),
      handle: async () => new JsonText<Record<string, unknown>>(text),
    });
  let harness: RouteHarness;

  beforeAll(async () => {
    harness = await startRouteHarness([route(false), route(true)]);
  });

  afterAll(async () => {
    await harness.close();
  });

  it("sends the text inside the success envelope, unparsed, as JSON", async () => {
    const response = await fetch(`${harness.baseUrl}/text`);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("application/json; charset=utf-8");
    expect(await response.text()).toBe(`{"message":"success","data":${text}}`);
  });

  it("sends it alone on a raw route", async () => {
    const response = await fetch(`${harness.baseUrl}/text-raw`);
    expect(response.headers.get("content-type")).toBe("application/json; charset=utf-8");
    expect(await response.text()).toBe(text);
  });
});

describe("a route without a body schema", () => {
  let handled = 0;
  const route = defineRoute({
    method: "POST",
    path: "/no-body",
    operationId: "noBody",
    summary: "takes no body",
    tags: ["Test"],
    auth: "none",
    query: z.object({ id: z.string() }),
    handle: async () => {
      handled += 1;
      return {};
    },
  });
  let harness: RouteHarness;

  beforeAll(async () => {
    harness = await startRouteHarness([route]);
  });

  afterAll(async () => {
    await harness.close();
  });

  const post = (body?: string | Buffer, type = "application/json") =>
    fetch(`${harness.baseUrl}/no-body?id=1`, {
      method: "POST",
      ...(body === undefined ? {} : { body, headers: { "content-type": type } }),
    }).then(async (response) => ({
      status: response.status,
      body: (await response.json()) as { extra?: unknown },
    }));

  it("takes none, or an empty one", async () => {
    for (const body of [undefined, "", "{}", " { } "]) {
      expect((await post(body)).status, JSON.stringify(body)).toBe(200);
    }
    expect(handled).toBe(4);
  });

  it("refuses anything else, as a route with a body schema would, and does nothing", async () => {
    const extra = async (body: string | Buffer, type?: string) =>
      (await post(body, type)).body.extra;
    // Bytes that are not UTF-8 are refused, not read as U+FFFD.
    expect(
      await extra(Buffer.from([0x7b, 0x22, 0x61, 0xc3, 0x28, 0x22, 0x3a, 0x31, 0x7d])),
    ).toEqual([{ key: "body", message: "must be UTF-8", source: "body", code: "invalid_value" }]);
    expect(await extra('{"token_id": 3}')).toEqual([
      { key: "token_id", message: expect.any(String), source: "body", code: "unknown_key" },
    ]);
    expect(await extra("{bad json")).toEqual([
      { key: "body", message: "is not valid JSON", source: "body", code: "invalid_syntax" },
    ]);
    expect(await extra("<x/>", "text/xml")).toEqual([
      {
        key: "content-type",
        message: "must be application/json",
        source: "header",
        code: "invalid_value",
      },
    ]);
    const huge = await post(JSON.stringify({ pad: "x".repeat(2 * 1024 * 1024) }));
    expect(huge).toEqual({ status: 413, body: { message: "payload_too_large", data: {} } });
    expect(handled).toBe(4);
  });
});
