import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { createLogger } from "./logger.js";

/** The lines a logger writes, parsed. */
function captured() {
  const lines: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split("\n").filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  return { lines, logger: createLogger("test", "info", destination) };
}

describe("createLogger", () => {
  it("keeps an error's code as error_code, and hides codes and secrets elsewhere", () => {
    const { lines, logger } = captured();
    const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), {
      code: "ECONNREFUSED",
    });
    logger.error({ err: refused, body: { code: "123456", password: "hunter2" } }, "failed");
    expect(lines).toHaveLength(1);
    const [line] = lines as [{ err: Record<string, unknown>; body: Record<string, unknown> }];
    expect(line.err.error_code).toBe("ECONNREFUSED");
    expect(line.err.message).toBe("connect ECONNREFUSED 127.0.0.1:5432");
    expect(line.body).toEqual({ code: "[redacted]", password: "[redacted]" });
  });
});
