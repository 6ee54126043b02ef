import { describe, expect, it } from "vitest";
import { shiftFor, targetPosition } from "./positions.js";

describe("targetPosition", () => {
  it("keeps places inside the table and puts anything past the end last", () => {
    expect(targetPosition(0, 5)).toBe(0);
    expect(targetPosition(3, 5)).toBe(3);
    expect(targetPosition(4, 5)).toBe(4);
    expect(targetPosition(5, 5)).toBe(4);
    expect(targetPosition(2_147_483_647, 5)).toBe(4);
    expect(targetPosition(7, 1)).toBe(0);
  });
});

describe("shiftFor", () => {
  it("moves the fields in between towards the gap", () => {
    expect(shiftFor(4, 1)).toEqual({ low: 1, high: 3, by: 1 });
    expect(shiftFor(1, 4)).toEqual({ low: 2, high: 4, by: -1 });
    expect(shiftFor(2, 2)).toBeUndefined();
  });
});
