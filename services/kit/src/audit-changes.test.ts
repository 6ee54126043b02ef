import { describe, expect, it } from "vitest";
import {
  AUDIT_CHANGES_MAX_BYTES,
  type AuditChange,
  auditChangesJson,
  auditChangesOf,
  changesBetween,
  withSharedLabels,
} from "./audit-changes.js";

const bytes = (text: string) => Buffer.byteLength(text, "utf8");

describe("auditChangesJson", () => {
  it("keeps the changes as they are while they fit, and writes none as empty text", () => {
    const changes: AuditChange[] = [{ key: "7", label: "Name", old: "a", new: "b" }];
    expect(auditChangesOf(auditChangesJson(changes))).toEqual(changes);
    expect(auditChangesJson([])).toBe("");
  });

  it("replaces the largest values by their size until the changes fit", () => {
    const huge = "é".repeat(100_000); // 200,000 bytes
    const large = "x".repeat(90_000);
    const changes: AuditChange[] = [
      { key: "1", label: "Long", old: huge, new: `${huge}!` },
      { key: "2", label: "Other", old: large, new: "small" },
    ];
    const json = auditChangesJson(changes);
    expect(bytes(json)).toBeLessThanOrEqual(AUDIT_CHANGES_MAX_BYTES);
    expect(auditChangesOf(json)).toEqual([
      {
        key: "1",
        label: "Long",
        old: { omitted_bytes: 200_002 },
        new: { omitted_bytes: 200_003 },
      },
      // What fits after the two largest are gone stays whole.
      { key: "2", label: "Other", old: large, new: "small" },
    ]);
  });

  it("keeps what fits of changes too many to list, and says how many are left out", () => {
    const changes: AuditChange[] = Array.from({ length: 5_000 }, (_, i) => ({
      key: String(i),
      label: `${"L".repeat(90)}${i}`,
      new: i,
    }));
    const json = auditChangesJson(changes);
    expect(bytes(json)).toBeLessThanOrEqual(AUDIT_CHANGES_MAX_BYTES);
    const kept = auditChangesOf(json);
    const last = kept.at(-1)!;
    expect(last.key).toBe("*");
    const listed = kept.length - 1;
    expect(listed).toBeGreaterThan(1_000);
    expect(last.label).toBe(`${5_000 - listed} more not recorded`);
    // Values smaller than a note of their size stay.
    expect(kept[0]).toEqual({ key: "0", label: `${"L".repeat(90)}0`, new: 0 });
  });
});

describe("changesBetween", () => {
  it("sees no change in the order of an object's keys, and every other change", () => {
    const before = { options: { decimals: 2, min: 0, max: 9 }, name: "Amount" };
    expect(
      changesBetween(before, { options: { max: 9, min: 0, decimals: 2 }, name: "Amount" }),
    ).toEqual([]);
    expect(
      changesBetween(before, { options: { max: 9, min: 1, decimals: 2 }, name: "Amount" }),
    ).toEqual([{ key: "options", old: before.options, new: { max: 9, min: 1, decimals: 2 } }]);
    expect(changesBetween({ list: [1, 2] }, { list: [2, 1] })).toHaveLength(1);
  });
});

describe("withSharedLabels", () => {
  it("gives a change without a label its key's shared one, and keeps a label of its own", () => {
    const labels = { "1": "Name", "2": "Amount" };
    expect(
      withSharedLabels(
        [{ key: "1", new: "a" }, { key: "2", label: "Total", old: 1, new: 2 }, { key: "3" }],
        labels,
      ),
    ).toEqual([
      { key: "1", label: "Name", new: "a" },
      { key: "2", label: "Total", old: 1, new: 2 },
      { key: "3" },
    ]);
    // A key that is only an inherited property of an object is no label.
    expect(withSharedLabels([{ key: "toString" }], labels)).toEqual([{ key: "toString" }]);
    expect(withSharedLabels([{ key: "1" }], null)).toEqual([{ key: "1" }]);
  });
});
