import { describe, expect, it } from "vitest";
import { runAdminCommand, UsageError } from "./admin-cli.js";

/** Nothing listens there: a command refused before any call never notices. */
const target = {
  organizationUrl: "http://127.0.0.1:9",
  internalSecret: "a-secret-of-at-least-thirty-two-characters",
};

const enterprise = (overrides: Record<string, string>) => [
  "set-plan",
  "7",
  "enterprise",
  ...Object.entries({
    records: "1000",
    "api-calls-per-month": "1000",
    "file-storage-bytes": "1000",
    "transfer-bytes-per-month": "1000",
    members: "5",
    "max-file-bytes": "1000",
    ...overrides,
  }).map(([flag, value]) => `--${flag}=${value}`),
];

describe("runAdminCommand", () => {
  it("names the enterprise limits the service would refuse, before calling it", async () => {
    const refused = runAdminCommand(
      enterprise({ members: "0", "max-file-bytes": "9007199254740992" }),
      target,
    );
    await expect(refused).rejects.toBeInstanceOf(UsageError);
    await expect(refused).rejects.toThrow(
      "--max-file-bytes must be 0 to 9007199254740991\n--members must be at least 1",
    );
  });
});
