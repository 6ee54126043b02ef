import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { isSecret, newSecret, signedHeaders } from "./signature.js";

// Checked with the Standard Webhooks reference library, not with our own code.

describe("webhook signatures", () => {
  it("verify with the reference library", () => {
    const secret = newSecret();
    expect(isSecret(secret)).toBe(true);
    const body = JSON.stringify({ type: "record.created", row_id: 7, data: { "1": "é ü" } });
    const timestamp = Math.floor(Date.now() / 1000);
    const headers = signedHeaders([secret], "chg_42", timestamp, body);
    expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body));
    // Another secret, or another body, does not verify.
    expect(() => new Webhook(newSecret()).verify(body, headers)).toThrow();
    expect(() => new Webhook(secret).verify(`${body} `, headers)).toThrow();
  });

  it("carry two signatures during a rotation, each verifying with its own secret", () => {
    const [current, previous] = [newSecret(), newSecret()];
    const body = '{"type":"webhook.test"}';
    const headers = signedHeaders(
      [current, previous],
      "test_1",
      Math.floor(Date.now() / 1000),
      body,
    );
    expect(headers["webhook-signature"]!.split(" ")).toHaveLength(2);
    for (const secret of [current, previous]) {
      expect(new Webhook(secret).verify(body, headers)).toEqual({ type: "webhook.test" });
    }
  });

  it("tells secrets from other text", () => {
    expect(isSecret("whsec_abc")).toBe(false);
    expect(isSecret(newSecret().replace("whsec_", "wh_"))).toBe(false);
    expect(new Set(Array.from({ length: 20 }, newSecret)).size).toBe(20);
  });
});
