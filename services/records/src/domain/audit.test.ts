import { describe, expect, it } from "vitest";
import { valueChanges } from "./audit.js";

const fields = [
  { id: "1", name: "Name" },
  { id: "2", name: "Tags" },
  { id: "3", name: "Amount" },
  { id: "4", name: "Link" },
];

describe("valueChanges", () => {
  it("names every value of a new record, in field order, without old values", () => {
    expect(valueChanges(fields, {}, { "3": 5, "1": "Ada", "2": ["a"], "9": "gone field" })).toEqual(
      [
        { key: "1", label: "Name", new: "Ada" },
        { key: "2", label: "Tags", new: ["a"] },
        { key: "3", label: "Amount", new: 5 },
      ],
    );
  });

  it("skips values that did not change, comparing arrays and objects by content", () => {
    const before = { "1": "Ada", "2": ["a", "b"], "3": 5, "4": { id: 1 } };
    const after = { "1": "Ada", "2": ["a", "b"], "3": 5, "4": { id: 1 } };
    expect(valueChanges(fields, before, after)).toEqual([]);
    expect(valueChanges(fields, { "1": null }, {})).toEqual([]);
  });

  it("compares objects regardless of key order, nested ones too (jsonb reorders keys)", () => {
    const stored = { "4": { a: 2, bb: [1, { x: null, y: "z" }] } };
    const sent = { "4": { bb: [1, { y: "z", x: null }], a: 2 } };
    expect(valueChanges(fields, stored, sent)).toEqual([]);
    // Same keys, one value differs deep down; a key more; an array against an object.
    expect(valueChanges(fields, stored, { "4": { bb: [1, { y: "z", x: 0 }], a: 2 } })).toHaveLength(
      1,
    );
    expect(valueChanges(fields, { "4": { a: 1 } }, { "4": { a: 1, b: null } })).toHaveLength(1);
    expect(valueChanges(fields, { "4": { 0: "a" } }, { "4": ["a"] })).toHaveLength(1);
  });

  it("reports a change of value, of type, of order and to or from empty", () => {
    expect(
      valueChanges(
        fields,
        { "1": "Ada", "2": ["a", "b"], "3": 5 },
        { "2": ["b", "a"], "3": "5", "4": { id: 2 } },
      ),
    ).toEqual([
      { key: "1", label: "Name", old: "Ada" },
      { key: "2", label: "Tags", old: ["a", "b"], new: ["b", "a"] },
      { key: "3", label: "Amount", old: 5, new: "5" },
      { key: "4", label: "Link", new: { id: 2 } },
    ]);
  });
});
