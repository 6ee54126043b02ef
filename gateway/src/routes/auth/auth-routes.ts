import type { Client } from "@connectrpc/connect";
import type { IdentityService } from "@rowbase/proto/rowbase/identity/v1/identity_service_pb";
import { defineRoute, type Route } from "../../routing/route.js";
import { presentSession, presentUser } from "./auth-presenters.js";
import {
  AuthLoginSchema,
  AuthRefreshSchema,
  AuthRegisterSchema,
  AuthTokenSchema,
  AuthUserSchema,
  ResendCodeSchema,
  VerifyEmailSchema,
} from "./auth-schemas.js";

export interface AuthRoutesDeps {
  identity: Client<typeof IdentityService>;
  /** `ACCESS_TOKEN_TTL_SECONDS`, for `expires_in` when the service leaves it out. */
  accessTokenTtlSeconds: number;
}

const tags = ["Accounts"];

/** The account routes (the /oauth ones come separately). */
export function authRoutes({ identity, accessTokenTtlSeconds }: AuthRoutesDeps): Route[] {
  return [
    defineRoute({
      method: "POST",
      path: "/auth/register",
      operationId: "authRegister",
      summary: "Create an account and mail a 6-digit verification code",
      tags,
      auth: "none",
      rateLimits: ["auth_register_ip"],
      body: AuthRegisterSchema,
      errors: ["email_already_exists"],
      async handle({ body, call }) {
        await identity.register({ ...body, name: body.name ?? "" }, call);
        return {};
      },
    }),
    defineRoute({
      method: "POST",
      path: "/auth/verify_email",
      operationId: "authVerifyEmail",
      summary:
        "Confirm the e-mail with a code, which sets the password it was mailed for, and open a session",
      tags,
      auth: "none",
      rateLimits: ["auth_verify_ip", "auth_verify_email"],
      body: VerifyEmailSchema,
      response: AuthTokenSchema,
      errors: ["invalid_verification_code"],
      async handle({ body, call }) {
        const { session } = await identity.verifyEmail(body, call);
        return presentSession(session, accessTokenTtlSeconds);
      },
    }),
    defineRoute({
      method: "POST",
      path: "/auth/resend_code",
      operationId: "authResendCode",
      summary: "Mail a new verification code (answers the same for every address)",
      tags,
      auth: "none",
      rateLimits: ["auth_resend_ip"],
      body: ResendCodeSchema,
      async handle({ body, call }) {
        await identity.resendCode(body, call);
        return {};
      },
    }),
    defineRoute({
      method: "POST",
      path: "/auth/login",
      operationId: "authLogin",
      summary: "Sign in with e-mail and password",
      tags,
      auth: "none",
      rateLimits: ["auth_login_ip", "auth_login_email"],
      body: AuthLoginSchema,
      response: AuthTokenSchema,
      errors: ["email_not_verified", "invalid_credentials"],
      async handle({ body, call }) {
        const { session } = await identity.login(body, call);
        return presentSession(session, accessTokenTtlSeconds);
      },
    }),
    defineRoute({
      method: "POST",
      path: "/auth/refresh",
      operationId: "authRefresh",
      summary: "Trade a refresh token for new tokens (the old refresh token dies)",
      tags,
      auth: "none",
      rateLimits: ["auth_refresh_ip"],
      body: AuthRefreshSchema,
      response: AuthTokenSchema,
      errors: ["invalid_refresh_token"],
      async handle({ body, call }) {
        const { session } = await identity.refresh({ refreshToken: body.refresh_token }, call);
        return presentSession(session, accessTokenTtlSeconds);
      },
    }),
    defineRoute({
      method: "GET",
      path: "/auth/current",
      operationId: "authCurrent",
      summary: "The signed-in user",
      tags,
      auth: "session",
      response: AuthUserSchema,
      async handle({ call }) {
        const { user } = await identity.getCurrentUser({}, call);
        if (!user) throw new Error("identity returned no user");
        return { user: presentUser(user) };
      },
    }),
    defineRoute({
      method: "POST",
      path: "/auth/logout",
      operationId: "authLogout",
      summary: "Revoke the session family of the presented access token",
      tags,
      auth: "session",
      async handle({ call }) {
        await identity.logout({}, call);
        return {};
      },
    }),
  ];
}
