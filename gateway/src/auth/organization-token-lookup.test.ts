import net from "node:net";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createServiceClient, domainError } from "@rowbase/kit";
import { TokenAccess } from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import {
  OrganizationService,
  ResolveApiTokenResponseSchema,
} from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { describe, expect, it } from "vitest";
import { apiTokenSha256 } from "./api-token-authenticator.js";
import {
  apiTokenCallerOf,
  GATEWAY_PRINCIPAL,
  isUnknownTokenError,
  organizationTokenLookup,
} from "./organization-token-lookup.js";

describe("resolving API tokens through the organization service", () => {
  it("calls as the gateway's service principal, not as the request's caller", () => {
    expect(GATEWAY_PRINCIPAL).toEqual({ kind: "service", service: "gateway" });
  });

  it("turns ResolveApiToken's answer into the api_token principal", () => {
    const answer = (access: TokenAccess) =>
      apiTokenCallerOf(
        create(ResolveApiTokenResponseSchema, { tokenId: 31n, organizationId: 7n, access }),
      );
    expect(answer(TokenAccess.READ)).toEqual({
      kind: "api_token",
      tokenId: 31n,
      organizationId: 7n,
      access: "read",
    });
    expect(answer(TokenAccess.READ_WRITE).access).toBe("read_write");
    expect(() => answer(TokenAccess.UNSPECIFIED)).toThrow(/token access 0/);
    expect(() => apiTokenCallerOf(create(ResolveApiTokenResponseSchema, {}))).toThrow(/without/);
  });

  it("reads api_token_not_found (or a bare NotFound) as no such token, and nothing else", () => {
    expect(isUnknownTokenError(domainError(Code.NotFound, "api_token_not_found"))).toBe(true);
    expect(isUnknownTokenError(new ConnectError("gone", Code.NotFound))).toBe(true);
    expect(isUnknownTokenError(domainError(Code.NotFound, "organization_not_found"))).toBe(false);
    expect(isUnknownTokenError(new ConnectError("down", Code.Unavailable))).toBe(false);
    expect(isUnknownTokenError(domainError(Code.PermissionDenied, "internal_only"))).toBe(false);
    expect(isUnknownTokenError(new Error("bug"))).toBe(false);
  });

  it("fails Unavailable, rather than calling the token unknown, when the service is down", async () => {
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as net.AddressInfo;
    await new Promise<void>((resolve) => server.close(() => resolve()));

    const lookup = organizationTokenLookup(
      createServiceClient(OrganizationService, `http://127.0.0.1:${port}`),
      "test-secret-test-secret-test-secret",
    );
    const error = await lookup(apiTokenSha256(`rb_${"a".repeat(40)}`), "req-1").then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ConnectError);
    expect((error as ConnectError).code).toBe(Code.Unavailable);
  });
});
