import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ConnectRouter } from "@connectrpc/connect";
import { requestIdOf, requireService, requireUser } from "@rowbase/kit";
import {
  type Session,
  SessionSchema,
  type User,
  UserSchema,
} from "@rowbase/proto/rowbase/identity/v1/identity_pb";
import { IdentityService } from "@rowbase/proto/rowbase/identity/v1/identity_service_pb";
import type { Accounts, IssuedSession, UserRow } from "./accounts.js";
import type { AccessTokenSigner } from "./domain/access-tokens.js";
import type { OidcSignIn } from "./oidc-sign-in.js";

export interface IdentityServerDeps {
  accounts: Accounts;
  signer: AccessTokenSigner;
  oidc: OidcSignIn;
}

function toUser(row: UserRow): User {
  return create(UserSchema, {
    id: row.id,
    email: row.email,
    name: row.name,
    emailVerified: row.emailVerifiedAt !== null && row.emailVerifiedAt !== undefined,
    createdAt: timestampFromDate(row.createdAt),
  });
}

function toSession(issued: IssuedSession): Session {
  return create(SessionSchema, {
    accessToken: issued.accessToken,
    refreshToken: issued.refreshToken,
    expiresIn: issued.expiresIn,
    user: toUser(issued.user),
  });
}

/** The identity handlers: proto in, account rule, proto out. */
export function createRoutes({ accounts, signer, oidc }: IdentityServerDeps) {
  return (router: ConnectRouter) =>
    router.service(IdentityService, {
      async register(req) {
        await accounts.register(req.email, req.password, req.name);
        return {};
      },
      async verifyEmail(req) {
        return { session: toSession(await accounts.verifyEmail(req.email, req.code)) };
      },
      async resendCode(req) {
        await accounts.resendCode(req.email);
        return {};
      },
      async login(req) {
        return { session: toSession(await accounts.login(req.email, req.password)) };
      },
      async refresh(req) {
        return { session: toSession(await accounts.refresh(req.refreshToken)) };
      },
      async getCurrentUser(_req, ctx) {
        const caller = requireUser(ctx);
        return { user: toUser(await accounts.currentUser(caller.userId, caller.sessionId)) };
      },
      async logout(_req, ctx) {
        const caller = requireUser(ctx);
        await accounts.logout(caller.userId, caller.sessionId);
        return {};
      },
      getJwks() {
        return { keys: signer.jwks() };
      },
      async getUsers(req, ctx) {
        // Other services only (organization names its members): users' e-mails are not public.
        requireService(ctx);
        return { users: (await accounts.users(req.ids)).map(toUser) };
      },
      async beginOidcSignIn(req, ctx) {
        return { authorizationUrl: await oidc.begin(req.redirectUri, requestIdOf(ctx)) };
      },
      async exchangeOidcCode(req, ctx) {
        const issued = await oidc.exchange(req.code, req.state, requestIdOf(ctx));
        return { session: toSession(issued) };
      },
    });
}
