import { PRINCIPAL_HEADER, type Principal, REQUEST_ID_HEADER, verifyPrincipal } from "@rowbase/kit";
import { describe, expect, it } from "vitest";
import { downstreamCallOptions, RPC_TIMEOUT_MS } from "./downstream-call.js";

const SECRET = "downstream-call-test-secret-of-32-chars!";
const OTHER_SECRET = "another-downstream-call-secret-32-chars!";
const token: Principal = { kind: "api_token", tokenId: 17n, organizationId: 4n, access: "read" };
const user: Principal = { kind: "user", userId: 9n, sessionId: "s-1" };

async function principalOf(secret: string, caller: Principal | undefined) {
  const options = await downstreamCallOptions(secret, "req-1", caller);
  return (options.headers as Record<string, string>)[PRINCIPAL_HEADER];
}

describe("downstreamCallOptions", () => {
  it("carries the request id and the timeout, and no principal without a caller", async () => {
    const options = await downstreamCallOptions(SECRET, "req-9", undefined);
    expect(options.timeoutMs).toBe(RPC_TIMEOUT_MS);
    expect((options.headers as Record<string, string>)[REQUEST_ID_HEADER]).toBe("req-9");
    expect((options.headers as Record<string, string>)[PRINCIPAL_HEADER]).toBeUndefined();
  });

  it("reuses one signature per caller and secret, each verifiable as that caller", async () => {
    const first = await principalOf(SECRET, token);
    expect(await principalOf(SECRET, token)).toBe(first);
    expect(await verifyPrincipal(SECRET, first!)).toEqual(token);

    const member = await principalOf(SECRET, user);
    expect(member).not.toBe(first);
    expect(await verifyPrincipal(SECRET, member!)).toEqual(user);

    const elsewhere = await principalOf(OTHER_SECRET, token);
    expect(await verifyPrincipal(OTHER_SECRET, elsewhere!)).toEqual(token);
    expect(await verifyPrincipal(SECRET, elsewhere!)).toBeUndefined();
  });
});
