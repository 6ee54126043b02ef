/**
 * The named rate limits (docs/limits.md) and the `RATE_LIMITS` override syntax.
 * Pure: parsing and defaults only, so config validation and tests need no store.
 */

/** What a limit counts per: the client IP, the e-mail in the body, the user, the API token. */
export type RateLimitKeyKind = "ip" | "email" | "user" | "token" | "form";

/** Every limit name an operator may set; the suffix says what it is keyed by. */
export const RATE_LIMIT_KEYS = {
  auth_login_ip: "ip",
  auth_login_email: "email",
  auth_register_ip: "ip",
  auth_resend_ip: "ip",
  auth_verify_ip: "ip",
  /**
   * E-mail codes tried per address, whatever the IP. Five wrong tries kill a code, but a
   * new code can be had every minute; without this a guesser from many addresses got five tries
   * a minute at one account for as long as they liked.
   */
  auth_verify_email: "email",
  auth_refresh_ip: "ip",
  oauth_exchange_ip: "ip",
  /**
   * Starting an OpenID sign-in (`GET /oauth/idp`), which stores the
   * sign-in's state until the provider sends the browser back.
   */
  oauth_idp_ip: "ip",
  org_write_user: "user",
  records_token: "token",
  /** Record routes called with a member's session, per user, as `records_token` per token. */
  records_user: "user",
  /** Submissions to the public forms per client IP. */
  form_submit_ip: "ip",
  /** Submissions to one public form (by its key), whatever their IP. */
  form_submit_form: "form",
} as const satisfies Record<string, RateLimitKeyKind>;

export type RateLimitName = keyof typeof RATE_LIMIT_KEYS;

export const RATE_LIMIT_NAMES = Object.keys(RATE_LIMIT_KEYS) as RateLimitName[];

/** At most `points` requests per key in a fixed window of `seconds`. */
export interface RateLimitRule {
  points: number;
  seconds: number;
}

/** One rule per name; `null` switches that limit off. */
export type RateLimitSettings = Readonly<Record<RateLimitName, RateLimitRule | null>>;

/**
 * The defaults. "20 requests/s per token (burst 40)" becomes 40 per 2 s: the same average
 * rate, and a fixed window of that size lets a burst of 40 through, which a single
 * `points/seconds` pair (the override syntax) can express. A member's session on the record
 * routes gets the same allowance per user (`records_user`).
 */
export const DEFAULT_RATE_LIMITS: RateLimitSettings = {
  auth_login_ip: { points: 10, seconds: 60 },
  auth_login_email: { points: 5, seconds: 60 },
  auth_register_ip: { points: 10, seconds: 60 },
  auth_resend_ip: { points: 10, seconds: 60 },
  auth_verify_ip: { points: 10, seconds: 60 },
  auth_verify_email: { points: 20, seconds: 3600 },
  auth_refresh_ip: { points: 30, seconds: 60 },
  oauth_exchange_ip: { points: 20, seconds: 60 },
  oauth_idp_ip: { points: 20, seconds: 60 },
  org_write_user: { points: 30, seconds: 60 },
  records_token: { points: 40, seconds: 2 },
  records_user: { points: 40, seconds: 2 },
  form_submit_ip: { points: 10, seconds: 60 },
  form_submit_form: { points: 600, seconds: 60 },
};

export type RateLimitParseResult =
  | { ok: true; settings: RateLimitSettings }
  | { ok: false; problems: string[] };

const ENTRY = /^([a-z_]+)\s*=\s*(?:(\d+)\s*\/\s*(\d+)|(off))$/i;

/**
 * Reads `name=points/seconds,...` over the defaults. `off` alone disables every limit;
 * `name=off` disables one. Every problem is reported, not the first.
 */
export function parseRateLimits(text: string | undefined): RateLimitParseResult {
  const raw = (text ?? "").trim();
  if (raw.toLowerCase() === "off") {
    const off = Object.fromEntries(RATE_LIMIT_NAMES.map((name) => [name, null]));
    return { ok: true, settings: off as RateLimitSettings };
  }
  const settings: Record<RateLimitName, RateLimitRule | null> = { ...DEFAULT_RATE_LIMITS };
  const problems: string[] = [];
  const seen = new Set<string>();
  for (const entry of raw.split(",")) {
    const item = entry.trim();
    if (item === "") continue;
    const match = ENTRY.exec(item);
    if (!match) {
      problems.push(`'${item}' is not name=points/seconds or name=off`);
      continue;
    }
    const [, name = "", points, seconds, off] = match;
    if (!isRateLimitName(name)) {
      problems.push(`unknown rate limit '${name}' (known: ${RATE_LIMIT_NAMES.join(", ")})`);
      continue;
    }
    if (seen.has(name)) {
      problems.push(`rate limit '${name}' is set twice`);
      continue;
    }
    seen.add(name);
    if (off) {
      settings[name] = null;
      continue;
    }
    const rule = { points: Number(points), seconds: Number(seconds) };
    if (!Number.isSafeInteger(rule.points) || rule.points < 1) {
      problems.push(`'${name}': points must be a whole number of at least 1`);
    } else if (!Number.isSafeInteger(rule.seconds) || rule.seconds < 1) {
      problems.push(`'${name}': seconds must be a whole number of at least 1`);
    } else {
      settings[name] = rule;
    }
  }
  return problems.length > 0 ? { ok: false, problems } : { ok: true, settings };
}

function isRateLimitName(name: string): name is RateLimitName {
  return Object.hasOwn(RATE_LIMIT_KEYS, name);
}
