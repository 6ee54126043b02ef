import { randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { exportJWK, generateKeyPair } from "jose";
import type { Adapter, AdapterPayload, InteractionResults } from "oidc-provider";

/** What the test provider says about one of its accounts, besides `sub`. */
export interface TestOidcClaims {
  email?: string;
  email_verified?: boolean | string;
  name?: string;
}

export interface TestOidcProviderOptions {
  /** Redirect URIs registered for the client; the first is the default one. */
  redirectUris?: string[];
  /**
   * Where the provider puts e-mail and name: in the ID token (like most hosted providers), or
   * only at the userinfo endpoint (oidc-provider's conforming default).
   */
  claimsIn?: "id_token" | "userinfo";
}

export interface TestOidcProvider {
  issuer: string;
  clientId: string;
  clientSecret: string;
  redirectUris: string[];
  /** The OIDC_* environment of a Rowbase configured for this provider. */
  env: Record<string, string>;
  /** Creates or replaces an account; its claims are read at each sign-in. */
  setAccount(sub: string, claims: TestOidcClaims): void;
  /**
   * Plays the browser: follows an authorization URL through the provider's login and consent
   * as account `sub` and returns where the provider sends it back (a redirect URI with `code`
   * and `state`, or with `error`).
   */
  authorize(authorizationUrl: string, sub: string): Promise<URL>;
  close(): Promise<void>;
}

/**
 * The provider's state (sessions, interactions, codes, grants) in a map of this provider alone,
 * which is all a test needs; oidc-provider's own stand-in warns on every start.
 */
function memoryAdapter(): (model: string) => Adapter {
  const entries = new Map<string, { payload: AdapterPayload; expiresAt: number }>();
  const live = (key: string) => {
    const entry = entries.get(key);
    if (entry && entry.expiresAt <= Date.now()) entries.delete(key);
    return entries.get(key)?.payload;
  };
  const findWhere = async (model: string, test: (payload: AdapterPayload) => boolean) =>
    [...entries.keys()]
      .filter((key) => key.startsWith(`${model}:`))
      .map(live)
      .find((payload) => payload !== undefined && test(payload));
  return (model) => ({
    async upsert(id, payload, expiresIn) {
      const expiresAt = expiresIn ? Date.now() + expiresIn * 1000 : Number.POSITIVE_INFINITY;
      entries.set(`${model}:${id}`, { payload, expiresAt });
    },
    async find(id) {
      return live(`${model}:${id}`);
    },
    findByUid: (uid) => findWhere(model, (payload) => payload.uid === uid),
    findByUserCode: (userCode) => findWhere(model, (payload) => payload.userCode === userCode),
    async consume(id) {
      const payload = live(`${model}:${id}`);
      if (payload) payload.consumed = Math.floor(Date.now() / 1000);
    },
    async destroy(id) {
      entries.delete(`${model}:${id}`);
    },
    async revokeByGrantId(grantId) {
      for (const [key, entry] of entries) {
        if (entry.payload.grantId === grantId) entries.delete(key);
      }
    },
  });
}

/** Lifetimes in seconds, set so that oidc-provider does not note its defaults on every start. */
const TTL = {
  AccessToken: 600,
  AuthorizationCode: 60,
  Grant: 600,
  IdToken: 600,
  Interaction: 600,
  Session: 600,
};

/**
 * A real OpenID Connect provider (`oidc-provider`) on a free loopback port, with one confidential
 * client, for tests of sign-in. Its login and consent interactions complete at once for the
 * account the test names, so a test drives the whole authorization-code flow with `fetch`.
 */
export async function startTestOidcProvider(
  options: TestOidcProviderOptions = {},
): Promise<TestOidcProvider> {
  const { default: Provider } = await import("oidc-provider");
  const redirectUris = options.redirectUris ?? ["https://app.rowbase.test/oauth/callback"];
  const clientId = "rowbase";
  const clientSecret = randomBytes(24).toString("base64url");
  const accounts = new Map<string, TestOidcClaims>();

  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const { privateKey } = await generateKeyPair("RS256", { extractable: true });

  const provider = new Provider(issuer, {
    adapter: memoryAdapter(),
    ttl: TTL,
    clients: [
      {
        client_id: clientId,
        client_secret: clientSecret,
        redirect_uris: redirectUris,
        grant_types: ["authorization_code"],
        response_types: ["code"],
        token_endpoint_auth_method: "client_secret_basic",
      },
    ],
    jwks: { keys: [{ ...(await exportJWK(privateKey)), kid: "test-key", alg: "RS256" }] },
    cookies: { keys: [randomBytes(32).toString("hex")] },
    claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["name"] },
    conformIdTokenClaims: options.claimsIn === "userinfo",
    features: { devInteractions: { enabled: false } },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    findAccount(_ctx, sub) {
      const claims = accounts.get(sub);
      return claims && { accountId: sub, claims: () => ({ sub, ...claims }) };
    },
  });
  const serveProvider = provider.callback();

  /** Ends the pending interaction as `?account=<sub>`: logged in, and consenting to the scope. */
  async function interact(req: http.IncomingMessage, res: http.ServerResponse) {
    const details = await provider.interactionDetails(req, res);
    const accountId =
      new URL(req.url ?? "/", issuer).searchParams.get("account") ?? details.session?.accountId;
    if (!accountId) throw new Error("the interaction URL needs ?account=<sub>");
    const result: InteractionResults = {};
    if (details.prompt.name === "login") result.login = { accountId };
    if (details.prompt.name === "consent") {
      const grant = details.grantId
        ? await provider.Grant.find(details.grantId)
        : new provider.Grant({ accountId, clientId: String(details.params.client_id) });
      if (!grant) throw new Error("the interaction's grant is gone");
      grant.addOIDCScope(String(details.params.scope));
      result.consent = { grantId: await grant.save() };
    }
    await provider.interactionFinished(req, res, result, { mergeWithLastSubmission: false });
  }

  server.on("request", (req: http.IncomingMessage, res: http.ServerResponse) => {
    if (!req.url?.startsWith("/interaction/")) {
      void serveProvider(req, res);
      return;
    }
    interact(req, res).catch((error: unknown) => {
      res.statusCode = 500;
      res.end(String(error));
    });
  });

  const landsAtClient = (url: URL) => redirectUris.includes(`${url.origin}${url.pathname}`);

  return {
    issuer,
    clientId,
    clientSecret,
    redirectUris,
    env: {
      OIDC_ISSUER: issuer,
      OIDC_CLIENT_ID: clientId,
      OIDC_CLIENT_SECRET: clientSecret,
      OIDC_REDIRECT_URI: redirectUris[0] ?? "",
    },
    setAccount(sub, claims) {
      accounts.set(sub, claims);
    },
    async authorize(authorizationUrl, sub) {
      const cookies = new Map<string, string>();
      let next = new URL(authorizationUrl);
      for (let hop = 0; hop < 10; hop++) {
        if (next.pathname.startsWith("/interaction/")) next.searchParams.set("account", sub);
        const response = await fetch(next, {
          redirect: "manual",
          headers: { cookie: [...cookies].map(([name, value]) => `${name}=${value}`).join("; ") },
        });
        for (const header of response.headers.getSetCookie()) {
          const pair = header.split(";", 1)[0] ?? "";
          const name = pair.slice(0, pair.indexOf("=")).trim();
          const value = pair.slice(pair.indexOf("=") + 1);
          if (value === "" || /expires=thu, 01 jan 1970/i.test(header)) cookies.delete(name);
          else cookies.set(name, value);
        }
        const body = await response.text();
        const location = response.headers.get("location");
        if (!location) {
          throw new Error(`the provider answered ${response.status}: ${body.slice(0, 500)}`);
        }
        next = new URL(location, next);
        if (landsAtClient(next)) return next;
      }
      throw new Error("the provider kept redirecting");
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
