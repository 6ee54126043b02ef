import { describe, expect, it } from "vitest";
import { resolveRange } from "./byte-range.js";

describe("resolveRange", () => {
  it("serves the whole file without a range", () => {
    expect(resolveRange(undefined, 10)).toBeUndefined();
  });

  it("resolves first-last, first- and -suffix like RFC 9110", () => {
    expect(resolveRange({ first: 2n, last: 5n }, 10)).toEqual({ first: 2, last: 5 });
    expect(resolveRange({ first: 2n }, 10)).toEqual({ first: 2, last: 9 });
    expect(resolveRange({ first: 0n, last: 100n }, 10)).toEqual({ first: 0, last: 9 });
    expect(resolveRange({ first: 9n, last: 9n }, 10)).toEqual({ first: 9, last: 9 });
    expect(resolveRange({ first: 0n, suffixLength: 3n }, 10)).toEqual({ first: 7, last: 9 });
    expect(resolveRange({ first: 5n, suffixLength: 30n }, 10)).toEqual({ first: 0, last: 9 });
  });

  it("refuses what cannot be satisfied", () => {
    expect(resolveRange({ first: 10n }, 10)).toBe("unsatisfiable");
    expect(resolveRange({ first: 11n, last: 20n }, 10)).toBe("unsatisfiable");
    expect(resolveRange({ first: 5n, last: 4n }, 10)).toBe("unsatisfiable");
    expect(resolveRange({ first: -1n }, 10)).toBe("unsatisfiable");
    expect(resolveRange({ first: 0n, suffixLength: 0n }, 10)).toBe("unsatisfiable");
    expect(resolveRange({ first: 0n }, 0)).toBe("unsatisfiable");
    expect(resolveRange({ first: 0n, suffixLength: 5n }, 0)).toBe("unsatisfiable");
  });
});
