import { describe, expect, it } from "vitest";
import { DEFAULT_RATE_LIMITS, parseRateLimits, RATE_LIMIT_NAMES } from "./rate-limit-settings.js";

describe("parseRateLimits", () => {
  it("keeps the documented defaults when unset or empty", () => {
    expect(parseRateLimits(undefined)).toEqual({ ok: true, settings: DEFAULT_RATE_LIMITS });
    expect(parseRateLimits("  ")).toEqual({ ok: true, settings: DEFAULT_RATE_LIMITS });
    expect(DEFAULT_RATE_LIMITS.auth_login_ip).toEqual({ points: 10, seconds: 60 });
    expect(DEFAULT_RATE_LIMITS.auth_login_email).toEqual({ points: 5, seconds: 60 });
    expect(DEFAULT_RATE_LIMITS.auth_verify_email).toEqual({ points: 20, seconds: 3600 });
    expect(DEFAULT_RATE_LIMITS.auth_refresh_ip).toEqual({ points: 30, seconds: 60 });
    expect(DEFAULT_RATE_LIMITS.oauth_exchange_ip).toEqual({ points: 20, seconds: 60 });
    expect(DEFAULT_RATE_LIMITS.oauth_idp_ip).toEqual({ points: 20, seconds: 60 });
  });

  it("knows exactly the documented names", () => {
    expect([...RATE_LIMIT_NAMES].sort()).toEqual(
      [
        "auth_login_ip",
        "auth_login_email",
        "auth_register_ip",
        "auth_resend_ip",
        "auth_verify_ip",
        // An addition: e-mail codes tried per address.
        "auth_verify_email",
        "auth_refresh_ip",
        "oauth_exchange_ip",
        // An addition: starting an OpenID sign-in.
        "oauth_idp_ip",
        "org_write_user",
        "records_token",
        // The addition: record routes called with a member's session, per user.
        "records_user",
        "form_submit_ip",
        // An addition: submissions to one form, whatever their IP.
        "form_submit_form",
      ].sort(),
    );
  });

  it("overrides the named limits and leaves the others at their defaults", () => {
    const result = parseRateLimits("auth_login_ip=1000/60, records_token = 100000/1");
    expect(result).toEqual({
      ok: true,
      settings: {
        ...DEFAULT_RATE_LIMITS,
        auth_login_ip: { points: 1000, seconds: 60 },
        records_token: { points: 100000, seconds: 1 },
      },
    });
  });

  it("turns every limit off with 'off', and one with name=off", () => {
    const all = parseRateLimits("off");
    expect(all.ok && Object.values(all.settings).every((rule) => rule === null)).toBe(true);
    expect(parseRateLimits("OFF").ok).toBe(true);
    const one = parseRateLimits("auth_login_email=off");
    expect(one).toEqual({ ok: true, settings: { ...DEFAULT_RATE_LIMITS, auth_login_email: null } });
  });

  it("reports every problem: unknown names, bad syntax, zero values, duplicates", () => {
    const result = parseRateLimits(
      "login=5/60,auth_login_ip=abc,auth_refresh_ip=0/60,auth_verify_ip=5/0,auth_resend_ip=1/1,auth_resend_ip=2/2",
    );
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.problems).toHaveLength(5);
    expect(result.problems[0]).toMatch(/unknown rate limit 'login'/);
    expect(result.problems[1]).toMatch(/'auth_login_ip=abc' is not name=points\/seconds/);
    expect(result.problems[2]).toMatch(/auth_refresh_ip.*points/);
    expect(result.problems[3]).toMatch(/auth_verify_ip.*seconds/);
    expect(result.problems[4]).toMatch(/auth_resend_ip.*twice/);
  });
});
