import { randomBase62 } from "@rowbase/kit";

/** A refresh token: opaque, `rbr_` + 48 base62 characters. */
export function newRefreshToken(): string {
  return `rbr_${randomBase62(48)}`;
}
