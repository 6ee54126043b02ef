import { ApiTokenAuthenticator, organizationTokenLookup } from "@rowbase/gateway";
import { createServiceClient, errorInfoOf } from "@rowbase/kit";
import { runAdminCommand, UsageError } from "@rowbase/organization/admin";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newEmail, signUp } from "./support/accounts.js";
import { client } from "./support/http.js";

let sys: TestSystem;
let api: ReturnType<typeof client>;

beforeAll(async () => {
  sys = await startTestSystem({ RATE_LIMITS: "org_write_user=4/60" });
  api = client(sys.baseUrl);
});

afterAll(async () => {
  await sys?.stop();
});

const q = (values: Record<string, number>) =>
  Object.fromEntries(Object.entries(values).map(([k, v]) => [k, String(v)]));

describe("plan changes by an operator", () => {
  it("moves an organization to business and enterprise through the admin CLI's command", async () => {
    const owner = await signUp(sys, api);
    const org = (
      await api("POST", "/organization/create", { token: owner.token, body: { name: "Big" } })
    ).body.data.organization;
    const target = {
      organizationUrl: sys.system.grpcUrls.organization,
      internalSecret: sys.internalJwtSecret,
    };

    const said = await runAdminCommand(
      ["set-plan", String(org.organization_id), "business"],
      target,
    );
    expect(said).toContain("business");
    const limits = await api("GET", "/organization/limits", {
      token: owner.token,
      query: q({ organization_id: org.organization_id }),
    });
    expect(limits.body.data.plan).toBe("business");
    expect(limits.body.data.limits).toEqual({
      records: 1_000_000,
      api_calls_per_month: 5_000_000,
      file_storage_bytes: 50_000_000_000,
      transfer_bytes_per_month: 250_000_000_000,
      members: 30,
      max_file_bytes: 1_000_000_000,
      change_streams: 100,
      webhooks: 100,
      forms: 100,
    });

    await runAdminCommand(
      [
        "set-plan",
        String(org.organization_id),
        "enterprise",
        "--records=5000000",
        "--api-calls-per-month=9000000",
        "--file-storage-bytes=1000000000000",
        "--transfer-bytes-per-month=2000000000000",
        "--members=500",
        "--max-file-bytes=5000000000",
      ],
      target,
    );
    const enterprise = await api("GET", "/organization/limits", {
      token: owner.token,
      query: q({ organization_id: org.organization_id }),
    });
    expect(enterprise.body.data).toMatchObject({
      plan: "enterprise",
      // A limit the command leaves out takes the business plan's.
      limits: {
        records: 5_000_000,
        members: 500,
        change_streams: 100,
        webhooks: 100,
        forms: 100,
      },
    });

    await expect(
      runAdminCommand(["set-plan", String(org.organization_id), "gold"], target),
    ).rejects.toBeInstanceOf(UsageError);
    await expect(
      runAdminCommand(["set-plan", String(org.organization_id), "enterprise"], target),
    ).rejects.toBeInstanceOf(UsageError);
    const wrongSecret = runAdminCommand(["set-plan", String(org.organization_id), "free"], {
      ...target,
      internalSecret: "not-the-installation-secret-but-32-chars",
    });
    await expect(wrongSecret).rejects.toSatisfy(
      (error) => errorInfoOf(error)?.reason === "unauthorized",
    );
    expect(
      (
        await api("GET", "/organization/limits", {
          token: owner.token,
          query: q({ organization_id: org.organization_id }),
        })
      ).body.data.plan,
    ).toBe("enterprise");
  });

  it("refuses SetPlan from a user's session principal", async () => {
    const organization = createServiceClient(OrganizationService, sys.system.grpcUrls.organization);
    await expect(organization.setPlan({ organizationId: 1n })).rejects.toSatisfy(
      (error) => errorInfoOf(error)?.reason === "unauthorized",
    );
  });
});

describe("API token resolution for the gateway", () => {
  it("resolves a live token, records its use, and refuses it within 5 s of revocation", async () => {
    const owner = await signUp(sys, api);
    const org = (
      await api("POST", "/organization/create", { token: owner.token, body: { name: "Tokens" } })
    ).body.data.organization;
    const oid = q({ organization_id: org.organization_id });
    const created = await api("POST", "/api_token/create", {
      token: owner.token,
      query: oid,
      body: { name: "bot", access: "read" },
    });
    const { token, api_token: info } = created.body.data;
    const organization = createServiceClient(OrganizationService, sys.system.grpcUrls.organization);
    const authenticator = new ApiTokenAuthenticator(
      organizationTokenLookup(organization, sys.internalJwtSecret),
      sys.system.cache,
    );

    const caller = await authenticator.authenticate(token, "req-1");
    expect(caller).toEqual({
      kind: "api_token",
      tokenId: BigInt(info.token_id),
      organizationId: BigInt(org.organization_id),
      access: "read",
    });
    const listed = await api("GET", "/api_token/list", { token: owner.token, query: oid });
    expect(listed.body.data.api_tokens[0].last_used_at).toMatch(/Z$/);

    const revokedAt = Date.now();
    await api("POST", "/api_token/revoke", {
      token: owner.token,
      query: q({ organization_id: org.organization_id, token_id: info.token_id }),
    });
    let refused = false;
    while (!refused && Date.now() - revokedAt < 5000) {
      try {
        await authenticator.authenticate(token, "req-2");
        await new Promise((r) => setTimeout(r, 100));
      } catch (error) {
        expect(errorInfoOf(error)?.reason).toBe("unauthorized");
        refused = true;
      }
    }
    expect(refused).toBe(true);
    await expect(authenticator.authenticate(`rb_${"A".repeat(40)}`, "req-3")).rejects.toSatisfy(
      (error) => errorInfoOf(error)?.reason === "unauthorized",
    );
  });
});

describe("organization rate limits", () => {
  it("answers 429 with Retry-After past the per-user write allowance", async () => {
    const owner = await signUp(sys, api);
    const statuses: number[] = [];
    let last: Awaited<ReturnType<typeof api>> | undefined;
    for (let i = 0; i < 5; i++) {
      last = await api("POST", "/organization/create", {
        token: owner.token,
        body: { name: `Org ${i}` },
      });
      statuses.push(last.status);
    }
    expect(statuses).toEqual([200, 200, 200, 200, 429]);
    expect(last!.body).toEqual({ message: "too_many_requests", data: {} });
    expect(Number(last!.headers.get("retry-after"))).toBeGreaterThan(0);
    // Another user has an allowance of its own.
    const other = await signUp(sys, api);
    expect(
      (await api("POST", "/organization/create", { token: other.token, body: { name: "Mine" } }))
        .status,
    ).toBe(200);
    expect(
      (await api("GET", "/organization/list", { token: owner.token })).body.data.organizations,
    ).toHaveLength(4);
  });
});

describe("invite expiry", () => {
  it("drops an expired invite from lists and the member count, refuses accepting it and allows a new one", async () => {
    const short = await startTestSystem({ INVITE_TTL_SECONDS: "2" });
    try {
      const shortApi = client(short.baseUrl);
      const owner = await signUp(short, shortApi);
      const invitee = await signUp(short, shortApi);
      const org = (
        await shortApi("POST", "/organization/create", {
          token: owner.token,
          body: { name: "Brief" },
        })
      ).body.data.organization;
      const oid = q({ organization_id: org.organization_id });
      const invite = await shortApi("POST", "/organization/invite/create", {
        token: owner.token,
        query: oid,
        body: { email: invitee.email, role: "viewer" },
      });
      await shortApi("POST", "/organization/invite/create", {
        token: owner.token,
        query: oid,
        body: { email: newEmail(), role: "viewer" },
      });
      await new Promise((r) => setTimeout(r, 2500));
      expect(
        (await shortApi("GET", "/organization/invite/list", { token: owner.token, query: oid }))
          .body.data.invites,
      ).toEqual([]);
      expect(
        (await shortApi("GET", "/organization/my_invite/list", { token: invitee.token })).body.data
          .invites,
      ).toEqual([]);
      const accept = await shortApi("POST", "/organization/my_invite/accept", {
        token: invitee.token,
        query: q({ invite_id: invite.body.data.invite.invite_id }),
      });
      expect(accept.status).toBe(404);
      expect(accept.body).toEqual({ message: "invite_not_found", data: {} });
      const limits = await shortApi("GET", "/organization/limits", {
        token: owner.token,
        query: oid,
      });
      expect(limits.body.data.usage.members).toBe(1);
      const again = await shortApi("POST", "/organization/invite/create", {
        token: owner.token,
        query: oid,
        body: { email: invitee.email, role: "editor" },
      });
      expect(again.status).toBe(200);
      const another = await shortApi("POST", "/organization/invite/create", {
        token: owner.token,
        query: oid,
        body: { email: newEmail(), role: "editor" },
      });
      expect(another.status).toBe(200);
    } finally {
      await short.stop();
    }
  });
});
