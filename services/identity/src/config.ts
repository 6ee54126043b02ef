import { logLevel, optionalUrl, port, secret } from "@rowbase/kit";
import { z } from "zod";

const seconds = (fallback: number) => z.coerce.number().int().min(1).default(fallback);

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

export const identityEnv = z.object({
  DATABASE_URL: z.url(),
  REDIS_URL: optionalUrl,
  INTERNAL_JWT_SECRET: secret,
  LOG_LEVEL: logLevel,
  GRPC_HOST: z.string().default("0.0.0.0"),
  GRPC_PORT: port(50051),
  SMTP_URL: optionalUrl,
  MAIL_FROM: z.string().default("Rowbase <no-reply@rowbase.local>"),
  JWT_SIGNING_KEYS: signingKeys,
  CODE_TTL_SECONDS: seconds(900),
  ACCESS_TOKEN_TTL_SECONDS: seconds(900),
  REFRESH_TOKEN_TTL_SECONDS: seconds(2_592_000),
});

export type IdentityConfig = z.output<typeof identityEnv>;
export type SigningJwk = IdentityConfig["JWT_SIGNING_KEYS"][number];
