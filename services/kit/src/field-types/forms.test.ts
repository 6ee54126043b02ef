import { describe, expect, it } from "vitest";
import { formAllowsType, MAX_REDIRECT_URL_LENGTH, redirectUrlProblem } from "./forms.js";
import { FIELD_TYPE_NAMES } from "./types.js";

describe("form rules", () => {
  it("allow every writable type but files and links in a form", () => {
    expect(FIELD_TYPE_NAMES.filter((type) => !formAllowsType(type)).sort()).toEqual([
      "autonumber",
      "created_at",
      "file",
      "link",
      "lookup",
      "rollup",
      "updated_at",
    ]);
  });

  it("take https redirects, and http only on the local machine", () => {
    for (const ok of [
      "",
      "https://example.com/thanks?x=1#top",
      "http://localhost:3000/done",
      "http://127.0.0.1/done",
      "http://[::1]:8080/",
    ]) {
      expect(redirectUrlProblem(ok), ok).toBeUndefined();
    }
    for (const bad of [
      "http://example.com/",
      "javascript:alert(1)",
      "data:text/html,hi",
      "/relative",
      "https://user:pass@example.com/",
      `https://example.com/${"x".repeat(MAX_REDIRECT_URL_LENGTH)}`,
    ]) {
      expect(redirectUrlProblem(bad), bad).toBeDefined();
    }
  });
});
