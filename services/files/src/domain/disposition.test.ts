import { describe, expect, it } from "vitest";
import { dispositionFor } from "./disposition.js";

describe("dispositionFor", () => {
  it.each([
    "image/png",
    "image/jpeg",
    "image/gif",
    "image/webp",
    "audio/mpeg",
    "video/mp4",
    "text/plain",
    "application/pdf",
  ])("shows %s inline", (type) => {
    expect(dispositionFor(type)).toBe("inline");
  });

  it.each([
    "text/html",
    "image/svg+xml",
    "application/xml",
    "text/xml",
    "application/xhtml+xml",
    "text/javascript",
    "application/javascript",
    "application/x-shockwave-flash",
    "application/octet-stream",
    "application/zip",
  ])("serves %s as an attachment", (type) => {
    expect(dispositionFor(type)).toBe("attachment");
  });

  it("makes everything an attachment when a download is asked for", () => {
    expect(dispositionFor("image/png", true)).toBe("attachment");
  });
});
