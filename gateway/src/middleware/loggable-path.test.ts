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
});
