import type { Session, User } from "@rowbase/proto/rowbase/identity/v1/identity_pb";
import type { z } from "zod";
import { idOf, required, timeOf } from "../../presentation/wire-values.js";
import type { AuthTokenSchema, UserSchema } from "./auth-schemas.js";

export function presentUser(user: User): z.output<typeof UserSchema> {
  return {
    id: idOf(user.id),
    email: user.email,
    name: user.name,
    email_verified: user.emailVerified,
    created_at: timeOf(user.createdAt),
  };
}

/**
 * AuthTokenResponse data. `expires_in` falls back to the configured access-token lifetime in
 * case the service leaves it at the proto default.
 */
export function presentSession(
  session: Session | undefined,
  defaultExpiresIn: number,
): z.output<typeof AuthTokenSchema> {
  const { accessToken, refreshToken, expiresIn, user } = required(session, "session");
  return {
    access_token: accessToken,
    refresh_token: refreshToken,
    token_type: "Bearer",
    expires_in: expiresIn || defaultExpiresIn,
    user: presentUser(required(user, "session.user")),
  };
}
