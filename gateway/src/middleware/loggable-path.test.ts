import { describe, expect, it } from "vitest";
import { loggablePath } from "./loggable-path.js";

describe("loggablePath", () => {
  it("hides a signed file link's token, and only that", () => {
    expect(loggablePath("/file/signed/eyJhbGciOi.abc.def")).toBe("/file/signed/[redacted]");
    expect(loggablePath("/FILE/signed/tok/extra")).toBe("/FILE/signed/[redacted]/extra");
    expect(loggablePath("/file/serve")).toBe("/file/serve");
    expect(loggablePath("/public/v1/databases/1/tables/2/records/3")).toBe(
      "/public/v1/databases/1/tables/2/records/3",
    );
  });

  it("shortens a public form's key to its first six characters", () => {
    const key = "AbCdEf0123456789_-xyzQ";
    expect(loggablePath(`/forms/${key}`)).toBe("/forms/AbCdEf…");
    expect(loggablePath(`/forms/${key}/submit`)).toBe("/forms/AbCdEf…/submit");
    expect(loggablePath("/form/list")).toBe("/form/list");
  });
});
