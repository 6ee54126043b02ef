import type { JsonObject } from "@bufbuild/protobuf";
import { RECORD_MAX_BYTES } from "@rowbase/kit";
import { describe, expect, it } from "vitest";
import { checkDataSizes, dataArrayJson, RecordsTooLarge } from "./rows.js";

/** The indexes `check` refuses, [] when it refuses none. */
function refused(check: (datas: JsonObject[]) => unknown, datas: JsonObject[]): readonly number[] {
  try {
    check(datas);
    return [];
  } catch (error) {
    if (error instanceof RecordsTooLarge) return error.indexes;
    throw error;
  }
}

describe("checkDataSizes", () => {
  it("refuses the records dataArrayJson refuses, at the bound and around it", () => {
    const datas: JsonObject[] = [];
    // A text of n bytes makes `{"1":"…"}` n + 8 bytes.
    for (const delta of [-1, 0, 1]) {
      datas.push({ 1: "a".repeat(RECORD_MAX_BYTES - 8 + delta) });
      // Three bytes per unit, and six per escaped control character.
      datas.push({ 1: "✓".repeat(Math.floor((RECORD_MAX_BYTES - 8) / 3) + delta) });
      datas.push({ 1: "\u0001".repeat(Math.floor((RECORD_MAX_BYTES - 8) / 6) + delta) });
    }
    // Numbers count written out in full: 1e+308 is 309 digits.
    const huge = Math.floor(RECORD_MAX_BYTES / 310);
    for (const count of [huge - 1, huge, huge + 1]) {
      datas.push({ 2: Array.from({ length: count }, () => 1e308) });
    }
    datas.push({ 1: "small", 2: 1.5e-7, 3: [true, null, { 4: "x" }] });
    const expected = refused(dataArrayJson, datas);
    expect(expected.length).toBeGreaterThan(0);
    expect(expected.length).toBeLessThan(datas.length);
    expect(refused(checkDataSizes, datas)).toEqual(expected);
  });
});
