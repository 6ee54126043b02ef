import { describe, expect, it } from "vitest";
import { toJsonText } from "./support/json-text.js";
import { applyMutations } from "./support/schema-arbitrary.js";

// The fuzzer's mutations must leave what they insert untouched: the weird values are constants
// shared by every run of every route, and one changed in place changes all the runs after it.
describe("fuzz mutations", () => {
  it("add into an inserted constant changes a copy, not the constant", () => {
    const shared: unknown[] = [];
    // Slot 0 is the root, slot 1 its key `x`: replace `x` by the constant, then add into it.
    const out = applyMutations({ x: 1 }, [
      { kind: "replace", at: 1, value: shared },
      { kind: "add", at: 1, key: "k", value: shared },
    ]);
    expect(shared).toEqual([]);
    expect(toJsonText(out)).toBe('{"x":[[]]}');
  });

  it("an object gets the added key on a copy, and the input value is not changed", () => {
    const input = { x: { y: [1] } };
    const shared = { z: 2 };
    const out = applyMutations(input, [
      { kind: "replace", at: 2, value: shared },
      { kind: "add", at: 2, key: "__proto__", value: shared },
      { kind: "nest", at: 0, depth: 2 },
    ]);
    expect(input).toEqual({ x: { y: [1] } });
    expect(shared).toEqual({ z: 2 });
    expect(toJsonText(out)).toBe('{"a":{"a":{"x":{"y":{"z":2,"__proto__":{"z":2}}}}}}');
  });
});
