import { describe, expect, it } from "vitest";
import { checkFileName, uploadFileName } from "./file-name.js";

describe("checkFileName", () => {
  it("accepts ordinary names, trimmed, up to 255 characters", () => {
    expect(checkFileName("  report 2026.pdf ")).toEqual({ name: "report 2026.pdf" });
    expect(checkFileName("é".repeat(255))).toEqual({ name: "é".repeat(255) });
    expect(checkFileName("😀".repeat(255))).toEqual({ name: "😀".repeat(255) });
    expect(checkFileName("..hidden")).toEqual({ name: "..hidden" });
  });

  it.each([
    ["", "must be 1-255 characters"],
    ["   ", "must be 1-255 characters"],
    ["a".repeat(256), "must be 1-255 characters"],
    ["../x", "must not contain '/' or '\\'"],
    ["a/b", "must not contain '/' or '\\'"],
    ["a\\b", "must not contain '/' or '\\'"],
    ["a\u0000b", "must not contain control characters"],
    ["a\nb", "must not contain control characters"],
    ["a\u007fb", "must not contain control characters"],
    ["a\u0085b", "must not contain control characters"],
    ["invoice\u202efdp.exe", "must not contain control characters"],
    ["\u200b", "must contain a visible character"],
    [" \u2060\u200d ", "must contain a visible character"],
    [".", "must not be '.' or '..'"],
    ["..", "must not be '.' or '..'"],
  ])("refuses %j", (name, problem) => {
    expect(checkFileName(name)).toEqual({ problem });
  });
});

describe("uploadFileName", () => {
  it("keeps the last path segment without control characters", () => {
    expect(uploadFileName("C:\\fakepath\\photo.png")).toBe("photo.png");
    expect(uploadFileName("../../etc/passwd")).toBe("passwd");
    expect(uploadFileName("a\u0000b\n.txt")).toBe("ab.txt");
    expect(uploadFileName(" spaced.txt ")).toBe("spaced.txt");
  });

  it("names what is left with nothing 'file'", () => {
    expect(uploadFileName("")).toBe("file");
    expect(uploadFileName("dir/")).toBe("file");
    expect(uploadFileName("..")).toBe("file");
    expect(uploadFileName("\u0001\u0002")).toBe("file");
    // Names that show nothing, which a rename refuses.
    expect(uploadFileName("\u200b")).toBe("file");
    expect(uploadFileName("dir/\u2060\u200d\ufe0f")).toBe("file");
    expect(uploadFileName("\u202e\u200b")).toBe("file");
  });

  it("shortens long names to 255 characters, keeping the extension", () => {
    const name = uploadFileName(`${"x".repeat(300)}.jpeg`);
    expect([...name].length).toBe(255);
    expect(name.endsWith("x.jpeg")).toBe(true);
    expect(checkFileName(name)).toEqual({ name });
  });

  it("names 'file' what shows nothing once shortened", () => {
    expect(uploadFileName(`${"\u200b".repeat(300)}x`)).toBe("file");
  });
});
