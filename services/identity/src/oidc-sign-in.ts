import {
  type EntityManager,
  LockMode,
  UniqueConstraintViolationException,
} from "@mikro-orm/postgresql";
import {
  Code,
  type ConnectError,
  domainError,
  type Logger,
  type Orm,
  sha256Hex,
  validationFailed,
} from "@rowbase/kit";
import * as oidc from "openid-client";
import type { Accounts, IssuedSession, UserRow } from "./accounts.js";
import { isLoopbackUrl, type OidcSettings } from "./config.js";
import { EmailCode, OidcIdentity, OidcSignInAttempt, User } from "./db/entities.js";
import {
  chooseRedirectUri,
  OIDC_SCOPE,
  type OidcProfile,
  profileOf,
  SIGN_IN_TTL_SECONDS,
} from "./domain/oidc.js";

/** Seconds openid-client waits for each request to the provider (below the gateway's 10 s). */
const PROVIDER_TIMEOUT_SECONDS = 5;

export interface OidcSignInDeps {
  orm: Orm;
  accounts: Accounts;
  /**
   * Undefined when the operator configured no provider: starting a sign-in answers Unavailable
   * (the deployment cannot offer it), exchanging answers idp_auth_error like any failed exchange,
   * so that a client never retries an exchange that cannot succeed.
   */
  settings: OidcSettings | undefined;
  logger: Logger;
}

interface PendingSignIn {
  nonce: string;
  codeVerifier: string;
  redirectUri: string;
}

/** Why a sign-in was refused, for the log only: the client learns nothing but idp_auth_error. */
class SignInRefused extends Error {
  override name = "SignInRefused";
}

/**
 * Sign-in through one OpenID Connect provider with the authorization-code flow, PKCE S256, state
 * and nonce (openid-client checks the ID token's signature, issuer, audience, expiry and nonce).
 *
 * A provider account is linked to a user by (issuer, subject) at its first sign-in: to the user
 * with the same e-mail if there is one, else to a new user without a password. Either happens
 * only when the provider says `email_verified: true`; later sign-ins follow the link and no
 * longer look at the e-mail.
 */
export class OidcSignIn {
  private discovered: Promise<oidc.Configuration> | undefined;

  constructor(private readonly deps: OidcSignInDeps) {}

  private em(): EntityManager {
    return this.deps.orm.em.fork();
  }

  /** The provider's authorization URL for a new sign-in, remembered for 10 minutes. */
  async begin(requestedRedirectUri: string, requestId?: string): Promise<string> {
    const settings = this.settings();
    const redirectUri = chooseRedirectUri(
      requestedRedirectUri,
      settings.redirectUri,
      settings.redirectUris,
    );
    if (!redirectUri) {
      throw validationFailed([
        {
          key: "redirect_uri",
          message: "is not an allowed redirect URI",
          source: "query",
          code: "invalid_value",
        },
      ]);
    }
    let config: oidc.Configuration;
    try {
      config = await this.configuration(settings);
    } catch (error) {
      this.deps.logger.warn(
        { failure: loggableFailure(error), request_id: requestId },
        "OpenID Connect discovery failed",
      );
      throw domainError(Code.Unavailable, "service_unavailable");
    }

    const state = oidc.randomState();
    const nonce = oidc.randomNonce();
    const codeVerifier = oidc.randomPKCECodeVerifier();
    const em = this.em();
    await em.nativeDelete(OidcSignInAttempt, { expiresAt: { $lt: new Date() } });
    em.create(OidcSignInAttempt, {
      stateHash: sha256Hex(state),
      nonce,
      codeVerifier,
      redirectUri,
      expiresAt: new Date(Date.now() + SIGN_IN_TTL_SECONDS * 1000),
    });
    await em.flush();
    return oidc.buildAuthorizationUrl(config, {
      redirect_uri: redirectUri,
      scope: OIDC_SCOPE,
      state,
      nonce,
      code_challenge: await oidc.calculatePKCECodeChallenge(codeVerifier),
      code_challenge_method: "S256",
    }).href;
  }

  /**
   * Trades the provider's code for a Rowbase session. The state is consumed first, so a second
   * try with it fails whatever happens to the first.
   */
  async exchange(code: string, state: string, requestId?: string): Promise<IssuedSession> {
    const settings = this.deps.settings;
    const refuse = (error: unknown): ConnectError => {
      this.deps.logger.info(
        { failure: loggableFailure(error), request_id: requestId },
        "OpenID Connect sign-in refused",
      );
      return domainError(Code.InvalidArgument, "idp_auth_error");
    };

    if (!settings) throw refuse(new SignInRefused("no OpenID Connect provider is configured"));
    const pending = await this.consume(state);
    if (!pending) throw refuse(new SignInRefused("unknown, expired or already used state"));

    let identity: { issuer: string; subject: string };
    let profile: OidcProfile;
    try {
      ({ identity, profile } = await this.redeem(settings, code, state, pending));
    } catch (error) {
      throw refuse(error);
    }
    const user = await this.userFor(identity, profile);
    if (user instanceof SignInRefused) throw refuse(user);
    return this.deps.accounts.openSession(user);
  }

  private settings(): OidcSettings {
    if (!this.deps.settings) throw domainError(Code.Unavailable, "service_unavailable");
    return this.deps.settings;
  }

  /** The provider's metadata, discovered once; a failed discovery is retried on the next call. */
  private configuration(settings: OidcSettings): Promise<oidc.Configuration> {
    this.discovered ??= oidc
      .discovery(
        new URL(settings.issuer),
        settings.clientId,
        undefined,
        oidc.ClientSecretBasic(settings.clientSecret),
        {
          timeout: PROVIDER_TIMEOUT_SECONDS,
          // Plain http is accepted by the configuration only for a provider on this machine.
          execute: isLoopbackUrl(settings.issuer) ? [oidc.allowInsecureRequests] : [],
        },
      )
      .catch((error: unknown) => {
        this.discovered = undefined;
        throw error;
      });
    return this.discovered;
  }

  /** Takes the pending sign-in of this state out of the table, once, if it has not expired. */
  private async consume(state: string): Promise<PendingSignIn | undefined> {
    const rows = await this.em().execute<
      { nonce: string; code_verifier: string; redirect_uri: string; live: boolean }[]
    >(
      `delete from oidc_sign_in where state_hash = ?
       returning nonce, code_verifier, redirect_uri, expires_at > now() as live`,
      [sha256Hex(state)],
    );
    const row = rows[0];
    if (!row?.live) return undefined;
    return { nonce: row.nonce, codeVerifier: row.code_verifier, redirectUri: row.redirect_uri };
  }

  /**
   * Redeems the code at the provider's token endpoint with the PKCE verifier, and reads who signed
   * in from the verified ID token (or the userinfo endpoint, for providers that put only `sub`
   * in the ID token).
   */
  private async redeem(
    settings: OidcSettings,
    code: string,
    state: string,
    pending: PendingSignIn,
  ): Promise<{ identity: { issuer: string; subject: string }; profile: OidcProfile }> {
    const config = await this.configuration(settings);
    const metadata = config.serverMetadata();
    // The browser brought code and state to the client, which posts only those two. The issuer
    // parameter (RFC 9207) guards against mixing up providers; with exactly one configured
    // provider it can only be this one.
    const callback = new URL(pending.redirectUri);
    callback.searchParams.set("code", code);
    callback.searchParams.set("state", state);
    if (metadata.authorization_response_iss_parameter_supported) {
      callback.searchParams.set("iss", metadata.issuer);
    }
    const tokens = await oidc.authorizationCodeGrant(config, callback, {
      expectedState: state,
      expectedNonce: pending.nonce,
      pkceCodeVerifier: pending.codeVerifier,
      idTokenExpected: true,
    });
    const claims = tokens.claims();
    if (!claims) throw new SignInRefused("the token response has no ID token");
    let profileClaims: Record<string, unknown> = claims;
    if (claims.email === undefined && metadata.userinfo_endpoint) {
      const userinfo = await oidc.fetchUserInfo(config, tokens.access_token, claims.sub);
      profileClaims = { ...userinfo, ...claims };
    }
    return {
      identity: { issuer: claims.iss, subject: claims.sub },
      profile: profileOf(profileClaims),
    };
  }

  /**
   * The user a provider account signs in as: the linked one, else (with a verified e-mail) the
   * user with that e-mail or a new one, linked from now on.
   */
  private async userFor(
    identity: { issuer: string; subject: string },
    profile: OidcProfile,
  ): Promise<UserRow | SignInRefused> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.em().transactional(async (em) => {
          const link = await em.findOne(OidcIdentity, identity);
          const linked = link ? await em.findOne(User, { id: link.userId }) : null;
          if (linked) return linked;
          if (!profile.email) return new SignInRefused("the provider sent no usable e-mail");
          if (!profile.emailVerified) {
            return new SignInRefused("the provider does not say the e-mail is verified");
          }
          let user = await em.findOne(
            User,
            { email: profile.email },
            { lockMode: LockMode.PESSIMISTIC_WRITE },
          );
          if (user && !user.emailVerifiedAt) {
            // Whoever registered this address never proved they own it, and the provider says
            // the person signing in does: their password must not open the account from now on,
            // nor the name they chose show as the owner's.
            user.passwordHash = null;
            user.name = profile.name;
            user.emailVerifiedAt = new Date();
            await em.nativeDelete(EmailCode, { userId: user.id });
          }
          user ??= em.create(User, {
            email: profile.email,
            name: profile.name,
            passwordHash: null,
            emailVerifiedAt: new Date(),
          });
          await em.flush();
          em.create(OidcIdentity, { ...identity, userId: user.id });
          return user;
        });
      } catch (error) {
        // Two first sign-ins of one account (or one address) raced; the loser sees the winner's.
        if (error instanceof UniqueConstraintViolationException && attempt === 0) continue;
        throw error;
      }
    }
  }
}

/**
 * What a refusal's log line keeps: the error's kind and message, the provider's OAuth error and
 * a network failure's reason, but not the other causes, which can hold the code and state. (The
 * logger redacts any key named `code`, hence `error_code`.)
 */
function loggableFailure(error: unknown): Record<string, unknown> {
  if (!(error instanceof Error)) return { message: String(error) };
  const fields = error as Error & Record<string, unknown>;
  return {
    type: error.name,
    message: error.message,
    error_code: fields.code,
    oauth_error: fields.error,
    oauth_error_description: fields.error_description,
    status: fields.status,
    cause: error.cause instanceof Error ? error.cause.message : undefined,
  };
}
