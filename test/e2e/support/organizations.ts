import { expect } from "vitest";
import type { SignedUpUser } from "./accounts.js";
import type { client } from "./http.js";

type Api = ReturnType<typeof client>;

/** Query values as strings, the way they travel. */
export const q = (values: Record<string, number | string>) =>
  Object.fromEntries(Object.entries(values).map(([k, v]) => [k, String(v)]));

export async function createOrg(
  api: Api,
  owner: SignedUpUser,
  name = `Org ${Math.random().toString(36).slice(2, 8)}`,
) {
  const response = await api("POST", "/organization/create", {
    token: owner.token,
    body: { name },
  });
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  return response.body.data.organization as {
    organization_id: number;
    organization_slug: string;
    name: string;
  };
}

/** Invites `invitee` with `role` and accepts; returns the member id. */
export async function addMember(
  api: Api,
  owner: SignedUpUser,
  orgId: number,
  invitee: SignedUpUser,
  role: string,
) {
  const invite = await api("POST", "/organization/invite/create", {
    token: owner.token,
    query: q({ organization_id: orgId }),
    body: { email: invitee.email, role },
  });
  expect(invite.status, JSON.stringify(invite.body)).toBe(200);
  const accepted = await api("POST", "/organization/my_invite/accept", {
    token: invitee.token,
    query: q({ invite_id: invite.body.data.invite.invite_id }),
  });
  expect(accepted.status).toBe(200);
  const members = await api("GET", "/organization/member/list", {
    token: owner.token,
    query: q({ organization_id: orgId }),
  });
  return members.body.data.members.find((m: { user_id: number }) => m.user_id === invitee.id)
    .member_id as number;
}

export function expectError(
  response: { status: number; body: unknown },
  status: number,
  message: string,
) {
  expect(response.status, JSON.stringify(response.body)).toBe(status);
  expect(response.body).toEqual({ message, data: {} });
}
