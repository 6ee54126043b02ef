import { describe, expect, it } from "vitest";
import { AllowedTargets } from "./address-policy.js";
import { webhookUrlProblem } from "./webhook-url.js";

describe("a webhook's URL", () => {
  const none = AllowedTargets.none();

  it("takes public http(s) URLs and names", () => {
    for (const url of [
      "https://hooks.example.com/rowbase",
      "http://8.8.8.8:8080/x",
      "https://[2001:4860:4860::8888]/x",
      "https://localhost/x",
    ]) {
      expect(webhookUrlProblem(url, none), url).toBeUndefined();
    }
  });

  it("refuses other schemes, credentials, relative and overlong URLs", () => {
    for (const url of [
      "ftp://example.com/x",
      "file:///etc/passwd",
      "https://user:pass@example.com/x",
      "/relative",
      `https://example.com/${"a".repeat(2048)}`,
    ]) {
      expect(webhookUrlProblem(url, none)?.kind, url).toBe("invalid");
    }
  });

  it("refuses a literal address webhooks may not reach, unless it is allowed", () => {
    for (const url of [
      "http://127.0.0.1/x",
      "http://169.254.169.254/latest/meta-data",
      "http://[::1]:8080/x",
      "http://[::ffff:10.0.0.1]/x",
      "http://10.0.0.1/x",
    ]) {
      expect(webhookUrlProblem(url, none)?.kind, url).toBe("forbidden");
    }
    expect(
      webhookUrlProblem("http://127.0.0.1:9000/x", AllowedTargets.parse("127.0.0.1:9000")),
    ).toBeUndefined();
    expect(
      webhookUrlProblem("http://127.0.0.1:9001/x", AllowedTargets.parse("127.0.0.1:9000"))?.kind,
    ).toBe("forbidden");
  });
});
