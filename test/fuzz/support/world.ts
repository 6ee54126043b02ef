import { startTestOidcProvider, type TestOidcProvider } from "@rowbase/identity/testing";
import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import { expect } from "vitest";
import { type SignedUpUser, signUp } from "../../e2e/support/accounts.js";
import { enterprise, filePart, raw, tokenIdOf } from "../../e2e/support/files.js";
import { client } from "../../e2e/support/http.js";
import { addMember, createOrg, q } from "../../e2e/support/organizations.js";
import {
  ALL_TYPES_FIELDS,
  createApiToken,
  createDatabase,
  createTable,
  createTenant,
  FULL,
  seed,
  type Tenant,
  type TestTable,
} from "../../e2e/support/records.js";

type Api = ReturnType<typeof client>;

/**
 * Everything the fuzzed requests point at: a real owner with a real organization on a roomy
 * plan, a database, a table with a field of every type and records in it (one with a file), API
 * tokens, members and invites. What the destructive routes may destroy is kept apart from what
 * every other route uses, so that they can run last without emptying the others' fixtures.
 */
export interface World {
  sys: TestSystem;
  api: Api;
  owner: SignedUpUser;
  tenant: Tenant;
  slug: string;
  table: TestTable;
  /** A second table whose fields the field routes change. */
  scratch: TestTable;
  rowIds: number[];
  /** Records only the delete routes aim at. */
  doomedRowIds: number[];
  fileRowId: number;
  fileFieldId: number;
  signedToken: string;
  /** A form of `table` (all its writable fields) and its key; forms only delete aims at. */
  formId: number;
  formKey: string;
  doomedFormIds: number[];
  memberId: number;
  doomedMemberId: number;
  memberEmail: string;
  inviteId: number;
  /** Invites addressed to the owner (by another organization). */
  myInviteIds: number[];
  doomedOrgId: number;
  doomedDatabaseIds: number[];
  doomedTableIds: number[];
  doomedTokenIds: number[];
  /** A user whose refresh token (and so its session) the refresh route may burn. */
  spare: SignedUpUser;
  /** A user whose session the logout route ends. */
  leaver: SignedUpUser;
  /** The OpenID Connect provider the system signs in with, and sign-ins started at it. */
  provider: TestOidcProvider;
  oidc: { code: string; state: string }[];
  stop(): Promise<void>;
}

export async function buildWorld(): Promise<World> {
  const provider = await startTestOidcProvider();
  const sys = await startTestSystem({ ...provider.env, RATE_LIMITS: "off" });
  const api = client(sys.baseUrl);
  const [owner, member, doomedMember, stranger, spare, leaver] = [
    await signUp(sys, api),
    await signUp(sys, api),
    await signUp(sys, api),
    await signUp(sys, api),
    await signUp(sys, api),
    await signUp(sys, api),
  ];
  const tenant = await createTenant(sys, api, { owner });
  await enterprise(sys, tenant, { members: 20 });
  const got = await api("GET", "/organization/get", {
    token: owner.token,
    query: q({ organization_id: tenant.orgId }),
  });
  const slug = got.body.data.organization.organization_slug as string;

  const table = await createTable(api, tenant, ALL_TYPES_FIELDS);
  const scratch = await createTable(api, tenant, ALL_TYPES_FIELDS);
  const rows = Array.from({ length: 40 }, (_, i) => ({
    ...FULL,
    Text: `row ${i}`,
    Number: i * 1.5,
    Flag: i % 2 === 0,
  }));
  const created = await seed(api, tenant.writeToken, table, rows);
  // The field routes change the scratch table's types: values make them convert or refuse.
  await seed(api, tenant.writeToken, scratch, rows.slice(0, 10));
  const rowIds = created.slice(0, 25).map((r) => r.row_id);
  const doomedRowIds = created.slice(25).map((r) => r.row_id);

  const fileRowId = rowIds[0]!;
  const fileFieldId = table.f.Attachment!.field_id;
  const upload = await raw(
    sys.baseUrl,
    "POST",
    `/file/upload?row_id=${fileRowId}&field_id=${fileFieldId}`,
    {
      token: tenant.writeToken,
      body: filePart(Buffer.from("hello fuzz"), "hello.txt", "text/plain"),
    },
  );
  expect(upload.status, upload.bytes.toString()).toBe(200);
  const url = await api("GET", "/file/url", {
    token: tenant.writeToken,
    query: q({ row_id: fileRowId, field_id: fileFieldId }),
  });
  expect(url.status, url.text).toBe(200);
  const signedToken = (url.body.data.url as string).split("/file/signed/")[1]!;

  const memberId = await addMember(api, owner, tenant.orgId, member, "editor");
  const doomedMemberId = await addMember(api, owner, tenant.orgId, doomedMember, "viewer");
  const invite = await api("POST", "/organization/invite/create", {
    token: owner.token,
    query: q({ organization_id: tenant.orgId }),
    body: { email: `pending.${Date.now()}@example.test`, role: "viewer" },
  });
  expect(invite.status, invite.text).toBe(200);

  const strangerOrg = await createOrg(api, stranger);
  await enterprise(sys, { ...tenant, orgId: strangerOrg.organization_id }, { members: 20 });
  const myInviteIds: number[] = [];
  for (const role of ["viewer", "editor"]) {
    // One invite per e-mail may be pending: the second comes from another organization.
    const org = role === "viewer" ? strangerOrg : await createOrg(api, stranger);
    const mine = await api("POST", "/organization/invite/create", {
      token: stranger.token,
      query: q({ organization_id: org.organization_id }),
      body: { email: owner.email, role },
    });
    expect(mine.status, mine.text).toBe(200);
    myInviteIds.push(mine.body.data.invite.invite_id);
  }

  const doomedOrgId = (await createOrg(api, owner)).organization_id;
  const doomedDatabaseIds = [
    await createDatabase(api, owner.token, tenant.orgId),
    await createDatabase(api, owner.token, tenant.orgId),
  ];
  const doomedTableIds: number[] = [];
  for (let i = 0; i < 3; i++) {
    const t = await createTable(
      api,
      tenant,
      [{ name: "Only", type: "text" }],
      doomedDatabaseIds[0],
    );
    doomedTableIds.push(t.tableId);
  }
  const forms: { form_id: number; form_key: string }[] = [];
  for (let i = 0; i < 3; i++) {
    const response = await api("POST", "/form/create", {
      token: owner.token,
      query: q({ table_id: table.tableId }),
      body: {
        name: `Form ${i}`,
        fields: ["Text", "Long", "Number", "Flag", "Day", "Moment", "Status", "Tags", "Email"],
        required: ["Email"],
      },
    });
    expect(response.status, response.text).toBe(200);
    forms.push(response.body.data.form);
  }
  const doomedTokenIds: number[] = [];
  for (let i = 0; i < 2; i++) {
    const token = await createApiToken(api, owner, tenant.orgId, "read");
    doomedTokenIds.push(Number(await tokenIdOf(api, tenant, token)));
  }

  provider.setAccount("fuzz-sub", {
    email: `idp.${Date.now()}@example.test`,
    email_verified: true,
  });
  const oidc: { code: string; state: string }[] = [];
  for (let i = 0; i < 3; i++) {
    const started = await api("GET", "/oauth/idp");
    expect(started.status, started.text).toBe(302);
    const landing = await provider.authorize(started.headers.get("location")!, "fuzz-sub");
    oidc.push({
      code: landing.searchParams.get("code")!,
      state: landing.searchParams.get("state")!,
    });
  }

  return {
    provider,
    oidc,
    async stop() {
      await sys.stop();
      await provider.close();
    },
    sys,
    api,
    owner,
    tenant,
    slug,
    table,
    scratch,
    rowIds,
    doomedRowIds,
    fileRowId,
    fileFieldId,
    signedToken,
    formId: forms[0]!.form_id,
    formKey: forms[0]!.form_key,
    doomedFormIds: forms.slice(1).map((form) => form.form_id),
    memberId,
    doomedMemberId,
    memberEmail: member.email,
    inviteId: invite.body.data.invite.invite_id,
    myInviteIds,
    doomedOrgId,
    doomedDatabaseIds,
    doomedTableIds,
    doomedTokenIds,
    spare,
    leaver,
  };
}
