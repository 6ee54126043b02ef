import type { Client } from "@connectrpc/connect";
import { callAs } from "@rowbase/kit";
import type { IdentityService } from "@rowbase/proto/rowbase/identity/v1/identity_service_pb";

export interface UserInfo {
  id: bigint;
  email: string;
  name: string;
  emailVerified: boolean;
}

/** Users' e-mails and names, as the identity service knows them now. */
export class UserDirectory {
  constructor(
    private readonly identity: Client<typeof IdentityService>,
    private readonly internalSecret: string,
  ) {}

  /** One batch call for all `ids`; unknown ids are missing from the map. */
  async users(ids: bigint[], requestId?: string): Promise<Map<bigint, UserInfo>> {
    const unique = [...new Set(ids)];
    if (unique.length === 0) return new Map();
    const options = await callAs(
      this.internalSecret,
      { kind: "service", service: "organization" },
      requestId,
    );
    const { users } = await this.identity.getUsers({ ids: unique }, options);
    return new Map(
      users.map((user) => [
        user.id,
        { id: user.id, email: user.email, name: user.name, emailVerified: user.emailVerified },
      ]),
    );
  }

  async user(id: bigint, requestId?: string): Promise<UserInfo | undefined> {
    return (await this.users([id], requestId)).get(id);
  }
}
