import { optionalUrl, port, serviceEnv, wholeNumber } from "@rowbase/kit";
import { z } from "zod";

const seconds = (fallback: number) => wholeNumber(1, Number.MAX_SAFE_INTEGER, fallback);

/** A JSON array of Ed25519 private JWKs with `kid`; the first one signs, all verify. */
const signingKeys = z.string().transform((raw, ctx) => {
  try {
    const keys = z
      .array(
        z.object({
          kty: z.literal("OKP"),
          crv: z.literal("Ed25519"),
          kid: z.string().min(1),
          x: z.string().min(1),
          d: z.string().min(1),
        }),
      )
      .min(1)
      .parse(JSON.parse(raw));
    return keys;
  } catch {
    ctx.addIssue({
      code: "custom",
      message: "must be a JSON array of Ed25519 private JWKs with kid",
    });
    return z.NEVER;
  }
});

const emptyToUndefined = (value: unknown) => (value === "" ? undefined : value);

const LOOPBACK_HOSTS = new Set(["localhost", "127.0.0.1", "[::1]"]);

/** Whether a URL may be fetched over plain HTTP: only on this machine (development, tests). */
export function isLoopbackUrl(url: string): boolean {
  return LOOPBACK_HOSTS.has(new URL(url).hostname);
}

/** The provider is trusted with identities, so it is reached over HTTPS except on loopback. */
const oidcIssuer = z.preprocess(
  emptyToUndefined,
  z
    .url({ protocol: /^https?$/, error: "must be an absolute http(s) URL" })
    .refine((url) => url.startsWith("https:") || isLoopbackUrl(url), {
      message: "must use https (plain http only on localhost)",
    })
    .optional(),
);

/**
 * An absolute URL the provider may send the browser back to, normalised (WHATWG href) because
 * the provider compares it character for character. No query or fragment: the code and state
 * arrive as the query, and openid-client rebuilds the URI without one for the token request.
 */
function redirectUriProblem(raw: string): string | undefined {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return `'${raw}' is not an absolute URL`;
  }
  if (url.search !== "" || url.hash !== "" || raw.includes("?") || raw.includes("#")) {
    return `'${raw}' must not have a query or fragment`;
  }
  return undefined;
}

const redirectUri = z.preprocess(
  emptyToUndefined,
  z
    .string()
    .transform((raw, ctx) => {
      const problem = redirectUriProblem(raw);
      if (problem) {
        ctx.addIssue({ code: "custom", message: problem });
        return z.NEVER;
      }
      return new URL(raw).href;
    })
    .optional(),
);

/** Comma-separated redirect URIs, each as `redirectUri`. */
const redirectUriList = z
  .string()
  .default("")
  .transform((raw, ctx) => {
    const uris: string[] = [];
    for (const entry of raw.split(",").map((item) => item.trim())) {
      if (entry === "") continue;
      const problem = redirectUriProblem(entry);
      if (problem) ctx.addIssue({ code: "custom", message: problem });
      else uris.push(new URL(entry).href);
    }
    return uris;
  });

const optionalText = z.preprocess(emptyToUndefined, z.string().optional());

/** Sign-in with OpenID Connect is on only when all of these are set. */
const OIDC_REQUIRED = [
  "OIDC_ISSUER",
  "OIDC_CLIENT_ID",
  "OIDC_CLIENT_SECRET",
  "OIDC_REDIRECT_URI",
] as const;

const identityFields = z.object({
  ...serviceEnv.shape,
  GRPC_PORT: port(50051),
  SMTP_URL: optionalUrl,
  MAIL_FROM: z.string().default("Rowbase <no-reply@rowbase.local>"),
  JWT_SIGNING_KEYS: signingKeys,
  CODE_TTL_SECONDS: seconds(900),
  ACCESS_TOKEN_TTL_SECONDS: seconds(900),
  REFRESH_TOKEN_TTL_SECONDS: seconds(2_592_000),
  OIDC_ISSUER: oidcIssuer,
  OIDC_CLIENT_ID: optionalText,
  OIDC_CLIENT_SECRET: optionalText,
  /** The default redirect URI, registered at the provider. */
  OIDC_REDIRECT_URI: redirectUri,
  /** Further redirect URIs a client may ask for (each registered at the provider too). */
  OIDC_ALLOWED_REDIRECT_URIS: redirectUriList,
});

export const identityEnv = identityFields.superRefine((env, ctx) => {
  const set = OIDC_REQUIRED.filter((key) => env[key] !== undefined);
  if (set.length > 0 && set.length < OIDC_REQUIRED.length) {
    for (const key of OIDC_REQUIRED.filter((name) => env[name] === undefined)) {
      ctx.addIssue({
        code: "custom",
        path: [key],
        message: `is required when ${set.join(", ")} ${set.length === 1 ? "is" : "are"} set`,
      });
    }
  }
  if (set.length === 0 && env.OIDC_ALLOWED_REDIRECT_URIS.length > 0) {
    ctx.addIssue({
      code: "custom",
      path: ["OIDC_ALLOWED_REDIRECT_URIS"],
      message: `needs ${OIDC_REQUIRED.join(", ")}`,
    });
  }
});

export type IdentityConfig = z.output<typeof identityEnv>;

/** Everything sign-in with one OpenID Connect provider needs. */
export interface OidcSettings {
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** Used when the client names none. */
  redirectUri: string;
  /** Every redirect URI a client may name: the default first. */
  redirectUris: string[];
}

/** The provider settings, or undefined when OpenID Connect sign-in is not configured. */
export function oidcSettingsOf(config: IdentityConfig): OidcSettings | undefined {
  const { OIDC_ISSUER, OIDC_CLIENT_ID, OIDC_CLIENT_SECRET, OIDC_REDIRECT_URI } = config;
  if (!OIDC_ISSUER || !OIDC_CLIENT_ID || !OIDC_CLIENT_SECRET || !OIDC_REDIRECT_URI) {
    return undefined;
  }
  return {
    issuer: OIDC_ISSUER,
    clientId: OIDC_CLIENT_ID,
    clientSecret: OIDC_CLIENT_SECRET,
    redirectUri: OIDC_REDIRECT_URI,
    redirectUris: [...new Set([OIDC_REDIRECT_URI, ...config.OIDC_ALLOWED_REDIRECT_URIS])],
  };
}
export type SigningJwk = IdentityConfig["JWT_SIGNING_KEYS"][number];
