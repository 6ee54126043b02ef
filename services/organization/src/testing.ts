import type { Client } from "@connectrpc/connect";
import { as, type ServedService, type TestStack } from "@rowbase/kit/testing";
import {
  type PlanLimits,
  PlanName,
  Role,
} from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import type { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { type OrganizationConfig, organizationEnv } from "./config.js";
import { migrateOrganization, type RunningOrganization, startOrganization } from "./service.js";

/**
 * Migrates and starts the real organization service on `stack`, asking the identity service at
 * `identityUrl` and mailing to the stack's catcher; `env` adds to or overrides its environment.
 */
export async function startTestOrganization(
  stack: TestStack,
  identityUrl: string,
  env: Record<string, string> = {},
): Promise<ServedService<OrganizationConfig, RunningOrganization>> {
  await migrateOrganization(stack.databaseUrl);
  return stack.serve(organizationEnv, startOrganization, {
    IDENTITY_GRPC_URL: identityUrl,
    SMTP_URL: stack.mail.url,
    ...env,
  });
}

/** The roles a test team's members have, by the name a test calls each member. */
const MEMBER_ROLES = { admin: Role.ADMIN, editor: Role.EDITOR, viewer: Role.VIEWER } as const;

export type TestMember = keyof typeof MEMBER_ROLES;

/** An organization with its owner and members, and a user of another organization. */
export type TestTeam<U, M extends TestMember> = {
  organizationId: bigint;
  owner: U;
  /** A user who owns another organization. */
  outsider: U;
  outsiderOrganizationId: bigint;
} & Record<M, U>;

/**
 * A new organization "Team" on `plan` (PLUS unless given), its owner, a member of each of
 * `members`' roles, and an outsider who owns an organization "Elsewhere"; `user` registers each.
 */
export async function createTestTeam<U extends { id: bigint; email: string }, M extends TestMember>(
  org: Client<typeof OrganizationService>,
  user: (name: string) => Promise<U>,
  members: readonly M[],
  plan: { plan: PlanName; enterpriseLimits?: PlanLimits } = { plan: PlanName.PLUS },
): Promise<TestTeam<U, M>> {
  const title = (name: string) => `${name[0]!.toUpperCase()}${name.slice(1)}`;
  const users = await Promise.all(["owner", ...members, "outsider"].map((n) => user(title(n))));
  const owner = users[0]!;
  const outsider = users.at(-1)!;
  const { organization } = await org.createOrganization(
    { name: "Team", organizationSlug: "" },
    await as(owner),
  );
  const organizationId = organization!.organizationId;
  await org.setPlan({ ...plan, organizationId }, await as({ kind: "operator", name: "test" }));
  const named = {} as Record<M, U>;
  for (const [index, member] of members.entries()) {
    const invited = users[index + 1]!;
    const { invite } = await org.createInvite(
      { organizationId, email: invited.email, role: MEMBER_ROLES[member] },
      await as(owner),
    );
    await org.acceptInvite({ inviteId: invite!.inviteId }, await as(invited));
    named[member] = invited;
  }
  const other = await org.createOrganization(
    { name: "Elsewhere", organizationSlug: "" },
    await as(outsider),
  );
  return {
    organizationId,
    owner,
    outsider,
    outsiderOrganizationId: other.organization!.organizationId,
    ...named,
  };
}
