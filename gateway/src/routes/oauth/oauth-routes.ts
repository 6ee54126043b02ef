import type { Client } from "@connectrpc/connect";
import type { IdentityService } from "@rowbase/proto/rowbase/identity/v1/identity_service_pb";
import { defineRoute, Redirect, type Route } from "../../routing/route.js";
import { presentSession } from "../auth/auth-presenters.js";
import { AuthTokenSchema } from "../auth/auth-schemas.js";
import { OAuthExchangeCodeSchema, OAuthIdpQuery } from "./oauth-schemas.js";

export interface OAuthRoutesDeps {
  identity: Client<typeof IdentityService>;
  /** `ACCESS_TOKEN_TTL_SECONDS`, for `expires_in` when the service leaves it out. */
  accessTokenTtlSeconds: number;
}

const tags = ["Accounts"];

/**
 * Sign-in through the OpenID Connect provider: the browser is sent to the provider, comes back to
 * the client's redirect URI with `code` and `state`, and the client trades those for Rowbase
 * tokens. When no provider is configured the redirect answers 503 `service_unavailable` and the
 * exchange 400 `idp_auth_error`, as any failed exchange does, so that no client retries it.
 */
export function oauthRoutes({ identity, accessTokenTtlSeconds }: OAuthRoutesDeps): Route[] {
  return [
    defineRoute({
      method: "GET",
      path: "/oauth/idp",
      operationId: "oauthIdp",
      summary: "Redirect to the identity provider to sign in",
      description:
        "Answers 302 with `Location` = the provider's authorization URL, carrying `state`, " +
        "`nonce` and a PKCE S256 challenge. A started sign-in can be exchanged once, within 10 " +
        "minutes.",
      tags,
      auth: "none",
      rateLimits: ["oauth_idp_ip"],
      query: OAuthIdpQuery,
      redirect: true,
      async handle({ query, call }) {
        const { authorizationUrl } = await identity.beginOidcSignIn(
          { redirectUri: query.redirect_uri ?? "" },
          call,
        );
        return new Redirect(authorizationUrl);
      },
    }),
    defineRoute({
      method: "POST",
      path: "/oauth/exchange",
      operationId: "oauthExchange",
      summary: "Trade the provider's code and state for a session",
      description:
        "Links the provider account to the user with the same e-mail, or creates one, when the " +
        "provider says the e-mail is verified. Any failure answers 400 `idp_auth_error`.",
      tags,
      auth: "none",
      rateLimits: ["oauth_exchange_ip"],
      body: OAuthExchangeCodeSchema,
      response: AuthTokenSchema,
      errors: ["idp_auth_error"],
      async handle({ body, call }) {
        const { session } = await identity.exchangeOidcCode(body, call);
        return presentSession(session, accessTokenTtlSeconds);
      },
    }),
  ];
}
