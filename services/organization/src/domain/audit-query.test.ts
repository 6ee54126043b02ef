import { describe, expect, it } from "vitest";
import { totalParts } from "./audit-query.js";

/** totalParts with instants as ISO text, for reading. */
function parts(since: string, until?: string) {
  const { whole, partial } = totalParts(new Date(since), until ? new Date(until) : undefined);
  const text = (range: { from: Date; to?: Date | undefined }) =>
    `${range.from.toISOString()} - ${range.to?.toISOString() ?? "open"}`;
  return { whole: whole && text(whole), partial: partial.map(text) };
}

describe("an audit list's total", () => {
  it("takes the whole hours from the kept counts and counts the ends", () => {
    expect(parts("2026-11-20T10:17:00.000Z", "2026-11-20T14:05:00.000Z")).toEqual({
      whole: "2026-11-20T11:00:00.000Z - 2026-11-20T14:00:00.000Z",
      partial: [
        "2026-11-20T10:17:00.000Z - 2026-11-20T11:00:00.000Z",
        "2026-11-20T14:00:00.000Z - 2026-11-20T14:05:00.000Z",
      ],
    });
  });

  it("counts nothing one by one when the range starts and ends on the hour, or is open", () => {
    expect(parts("2026-11-20T10:00:00.000Z", "2026-11-20T12:00:00.000Z")).toEqual({
      whole: "2026-11-20T10:00:00.000Z - 2026-11-20T12:00:00.000Z",
      partial: [],
    });
    expect(parts("2026-11-20T10:00:00.000Z")).toEqual({
      whole: "2026-11-20T10:00:00.000Z - open",
      partial: [],
    });
  });

  it("counts a range within one hour one by one", () => {
    expect(parts("2026-11-20T10:17:00.000Z", "2026-11-20T10:59:59.999Z")).toEqual({
      partial: ["2026-11-20T10:17:00.000Z - 2026-11-20T10:59:59.999Z"],
    });
    expect(parts("2026-11-20T10:17:00.000Z", "2026-11-20T11:30:00.000Z")).toEqual({
      partial: ["2026-11-20T10:17:00.000Z - 2026-11-20T11:30:00.000Z"],
    });
  });

  it("never names an hour of year 10000", () => {
    expect(parts("9999-12-31T23:30:00.000Z")).toEqual({
      partial: ["9999-12-31T23:30:00.000Z - open"],
    });
  });
});
