import { describe, expect, it } from "vitest";
import { normalizedPath } from "./normalize-path.js";

describe("normalizedPath", () => {
  it("decodes percent-encoded unreserved characters, in either case of hex digit", () => {
    expect(normalizedPath("/records/%31%32")).toBe("/records/12");
    expect(normalizedPath("/%6f%72g/%2D%2e%5F%7E")).toBe("/org/-._~");
  });

  it("keeps reserved and other octets, and what is no octet, as sent", () => {
    expect(normalizedPath("/a%2Fb/%2f/%00/%20/%25/%C3%A9/%3F%23")).toBe(
      "/a%2Fb/%2f/%00/%20/%25/%C3%A9/%3F%23",
    );
    expect(normalizedPath("/%/%4/%zz/%2531")).toBe("/%/%4/%zz/%2531");
  });
});
