import { z } from "zod";
import { requestBody, responseData } from "../../routing/api-schemas.js";
import { email, name, password, verificationCode } from "../../validation/fields.js";

/** Request bodies of the account routes, under their published schema names. */

export const AuthRegisterSchema = requestBody(
  "AuthRegisterSchema",
  z.strictObject({ email, password, name: name.optional() }),
);

export const VerifyEmailSchema = requestBody(
  "VerifyEmailSchema",
  z.strictObject({ email, code: verificationCode }),
);

export const ResendCodeSchema = requestBody("ResendCodeSchema", z.strictObject({ email }));

/**
 * Login takes any non-empty password up to the register limit: a too-short one is simply wrong
 * and gets the same 401 `invalid_credentials` as every other wrong password.
 */
export const AuthLoginSchema = requestBody(
  "AuthLoginSchema",
  z.strictObject({
    email,
    password: z.string().min(1, "is required").max(128, "must be at most 128 characters"),
  }),
);

export const AuthRefreshSchema = requestBody(
  "AuthRefreshSchema",
  z.strictObject({
    refresh_token: z.string().min(1, "is required").max(200, "must be at most 200 characters"),
  }),
);

/** Response `data` of the account routes. */

export const UserSchema = responseData(
  "User",
  z.object({
    id: z.number().int(),
    email: z.string(),
    name: z.string(),
    email_verified: z.boolean(),
    created_at: z.iso.datetime(),
  }),
);

export const AuthTokenSchema = responseData(
  "AuthToken",
  z.object({
    access_token: z.string().describe("Session access JWT for `Authorization: Bearer`"),
    refresh_token: z.string().describe("Opaque, single-use: each refresh returns a new one"),
    token_type: z.literal("Bearer"),
    expires_in: z.number().int().describe("Seconds until the access token expires"),
    user: UserSchema,
  }),
);

export const AuthUserSchema = responseData("AuthUser", z.object({ user: UserSchema }));
