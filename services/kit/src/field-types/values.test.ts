import type { JsonObject } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import {
  codePointLength,
  type FieldTypeName,
  inexactNumberProblem,
  isCalendarDate,
  isEmptyValue,
  JSON_MAX_BYTES,
  roundTo,
  validateValue,
} from "./index.js";

const field = (type: FieldTypeName, options: JsonObject = {}) => ({ type, options });

function stored(type: FieldTypeName, value: unknown, options: JsonObject = {}) {
  const result = validateValue(field(type, options), value);
  if (!result.ok) throw new Error(`expected ${JSON.stringify(value)} to pass: ${result.message}`);
  return result.value;
}

function problem(type: FieldTypeName, value: unknown, options: JsonObject = {}) {
  const result = validateValue(field(type, options), value);
  if (result.ok)
    throw new Error(`expected ${String(value)} to fail, got ${JSON.stringify(result.value)}`);
  return result.message;
}

const WRITABLE: FieldTypeName[] = [
  "text",
  "long_text",
  "number",
  "boolean",
  "date",
  "datetime",
  "single_select",
  "multi_select",
  "email",
  "url",
  "phone",
  "json",
];

describe("every type", () => {
  it("clears with null or undefined", () => {
    for (const type of WRITABLE) {
      expect(stored(type, null)).toBeNull();
      expect(stored(type, undefined)).toBeNull();
    }
  });

  it("clears with an empty string except text, long_text and json", () => {
    for (const type of WRITABLE) {
      expect(stored(type, "")).toBe(["text", "long_text", "json"].includes(type) ? "" : null);
    }
  });

  it("refuses every value of a read-only type", () => {
    for (const type of [
      "file",
      "autonumber",
      "created_at",
      "updated_at",
      "lookup",
      "rollup",
    ] as const) {
      for (const value of [null, 1, "2026-01-01T00:00:00Z", { id: 1 }]) {
        expect(problem(type, value)).toBe("is read-only");
      }
    }
  });

  it("counts empty values for required fields", () => {
    for (const empty of [null, undefined, "", []]) expect(isEmptyValue(empty)).toBe(true);
    for (const value of [0, false, " ", ["a"], {}]) expect(isEmptyValue(value)).toBe(false);
  });
});

describe("link", () => {
  it("stores row ids ascending, each once, from ids or {row_id} objects", () => {
    expect(stored("link", [5, { row_id: 2 }, 5, 3])).toEqual([2, 3, 5]);
    expect(stored("link", [])).toEqual([]);
    expect(stored("link", null)).toBeNull();
    expect(stored("link", [7], { table_id: 1, multiple: false })).toEqual([7]);
    expect(stored("link", [7, 7], { table_id: 1, multiple: false })).toEqual([7]);
  });

  it("refuses anything but positive integer ids, more than 1,000, and two for a single link", () => {
    for (const value of [
      1,
      "1",
      [0],
      [-1],
      [1.5],
      ["1"],
      [{ row_id: "1" }],
      [{ id: 1 }],
      [{ row_id: 1, x: 2 }],
      [null],
    ]) {
      expect(problem("link", value)).toMatch(/^must be an array of row ids/);
    }
    expect(problem("link", [2 ** 53])).toMatch(/^must be an array of row ids/);
    expect(
      problem(
        "link",
        Array.from({ length: 1001 }, (_, i) => i + 1),
      ),
    ).toBe("must link at most 1000 records");
    expect(problem("link", [1, 2], { table_id: 1, multiple: false })).toBe(
      "must link at most one record",
    );
  });
});

describe("text and long_text", () => {
  it("takes strings up to the limit in code points", () => {
    expect(stored("text", "hello")).toBe("hello");
    expect(stored("text", "  spaced  ")).toBe("  spaced  ");
    expect(stored("text", "x".repeat(10_000))).toHaveLength(10_000);
    expect(stored("text", "😀".repeat(10_000))).toHaveLength(20_000);
    expect(stored("long_text", "# Title\n\n**bold**\ttab".padEnd(100_000, "x"))).toHaveLength(
      100_000,
    );
    expect(stored("text", "abc", { max_length: 3 })).toBe("abc");
  });

  it("refuses longer strings, huge ones included", () => {
    expect(problem("text", "x".repeat(10_001))).toBe("must be at most 10000 characters");
    expect(problem("text", "😀".repeat(10_001))).toBe("must be at most 10000 characters");
    // 15,001 UTF-16 units, 10,001 characters.
    expect(problem("text", "😀".repeat(5_000) + "x".repeat(5_001))).toBe(
      "must be at most 10000 characters",
    );
    expect(stored("text", "😀".repeat(5_000) + "x".repeat(5_000))).toHaveLength(15_000);
    expect(problem("text", "abcd", { max_length: 3 })).toBe("must be at most 3 characters");
    expect(problem("long_text", "x".repeat(100_001))).toBe("must be at most 100000 characters");
    expect(problem("long_text", "x".repeat(5_000_000))).toBe("must be at most 100000 characters");
  });

  it("refuses non-strings and what PostgreSQL cannot store", () => {
    for (const value of [1, true, ["a"], { a: 1 }])
      expect(problem("text", value)).toBe("must be a string");
    expect(problem("text", "a\u0000b")).toBe("must not contain NUL characters");
    expect(problem("long_text", "a\ud800b")).toBe("must be valid Unicode (no unpaired surrogates)");
    expect(problem("text", "\udc00")).toBe("must be valid Unicode (no unpaired surrogates)");
  });

  it("counts code points", () => {
    expect(codePointLength("")).toBe(0);
    expect(codePointLength("a😀b")).toBe(3);
    expect(codePointLength("é")).toBe(1);
  });
});

describe("number", () => {
  it("takes JSON numbers and numeric strings, rounded to decimals", () => {
    expect(stored("number", 42)).toBe(42);
    expect(stored("number", 3.7)).toBe(4);
    expect(stored("number", -2.5)).toBe(-3);
    expect(stored("number", "12")).toBe(12);
    expect(stored("number", " -1.25 ", { decimals: 1 })).toBe(-1.3);
    expect(stored("number", "1e3")).toBe(1000);
    expect(stored("number", ".5", { decimals: 1 })).toBe(0.5);
    expect(stored("number", "+7.")).toBe(7);
    expect(stored("number", 1.005, { decimals: 2 })).toBe(1.01);
    expect(stored("number", 0.1 + 0.2, { decimals: 10 })).toBe(0.3);
    expect(stored("number", 1e-7, { decimals: 10 })).toBe(1e-7);
    expect(stored("number", 1e-12, { decimals: 10 })).toBe(0);
    expect(Object.is(stored("number", -0), 0)).toBe(true);
    expect(Object.is(stored("number", -0.1), 0)).toBe(true);
  });

  it.each([
    [Number.NaN, "must be a finite number"],
    [Number.POSITIVE_INFINITY, "must be a finite number"],
    [Number.NEGATIVE_INFINITY, "must be a finite number"],
    [JSON.parse("1e309"), "must be a finite number"],
    ["1e309", "must be a finite number"],
    ["9".repeat(400), "must be a finite number"],
    ["9".repeat(401), "must be a number"],
    ["NaN", "must be a number"],
    ["Infinity", "must be a number"],
    ["0x10", "must be a number"],
    ["1,5", "must be a number"],
    ["12abc", "must be a number"],
    ["1e", "must be a number"],
    [".", "must be a number"],
    ["--1", "must be a number"],
    [" ", "must be a number"],
    [true, "must be a number"],
    [[1], "must be a number"],
    [{ value: 1 }, "must be a number"],
    [10n, "must be a number"],
  ])("refuses %s", (value, message) => {
    expect(problem("number", value)).toBe(message);
  });

  it("reads numeric strings with or without a fraction or an exponent, and nothing else", () => {
    for (const [text, value] of [
      ["12", 12],
      ["12.", 12],
      ["12.5", 12.5],
      [".5", 0.5],
      ["-1.5e2", -150],
      ["+7E-1", 0.7],
    ] as const) {
      expect(stored("number", text, { decimals: 2 })).toBe(value);
    }
    for (const text of [".", "1..2", "1.2.3", "e5", "1e", `${"1".repeat(399)}x`]) {
      expect(problem("number", text)).toBe("must be a number");
    }
  });

  it("keeps every number it takes exactly, and refuses one a double would change", () => {
    for (const value of [9007199254740991, -9007199254740991, "9007199254740991", 2 ** 53 - 0.6]) {
      expect(Math.abs(stored("number", value) as number)).toBe(9007199254740991);
    }
    const beyond =
      "must be between -9007199254740991 and 9007199254740991, the largest numbers a number field keeps exactly";
    for (const value of [
      2 ** 53,
      JSON.parse("9223372036854775808"),
      "9223372036854775808",
      "-9007199254740993",
      1e300,
      Number.MAX_VALUE,
    ]) {
      expect(problem("number", value)).toBe(beyond);
      expect(problem("number", value, { decimals: 4 })).toBe(beyond);
    }
    // Past 15 significant digits once rounded, a fraction would come back otherwise.
    expect(stored("number", "12345678901234.5", { decimals: 1 })).toBe(12345678901234.5);
    expect(problem("number", "123456789012345.6", { decimals: 1 })).toMatch(/^must have at most/);
    expect(stored("number", "0.123456789012345678", { decimals: 10 })).toBe(0.123456789);
    expect(problem("number", "123456789012.123456789", { decimals: 10 })).toBe(
      "must have at most 15 significant digits once rounded to 10 decimal places (or be a whole number): a number field keeps no more exactly",
    );
    expect(problem("number", "1234567890123456.78", { decimals: 2 })).toMatch(/^must have at most/);
    expect(stored("number", "1234567890123456.78")).toBe(1234567890123457);
    expect(inexactNumberProblem(0.1 + 0.2, 10)).toMatch(/^must have at most/);
    expect(stored("number", 0.1 + 0.2, { decimals: 10 })).toBe(0.3);
  });

  it("checks min and max after rounding", () => {
    expect(stored("number", 10, { min: 0, max: 10 })).toBe(10);
    expect(problem("number", 10.6, { min: 0, max: 10 })).toBe("must be at most 10");
    expect(stored("number", 10.4, { min: 0, max: 10 })).toBe(10);
    expect(problem("number", -1, { min: 0 })).toBe("must be at least 0");
    expect(stored("number", -0.4, { min: 0 })).toBe(0);
  });

  it("rounds half away from zero through the decimal exponent", () => {
    expect(roundTo(2.675, 2)).toBe(2.68);
    expect(roundTo(-2.675, 2)).toBe(-2.68);
    expect(roundTo(123.456, 0)).toBe(123);
    expect(roundTo(2 ** 53 + 2, 3)).toBe(2 ** 53 + 2);
  });

  it("keeps a number with no more places than the decimals as it is, and -0 as 0", () => {
    expect(roundTo(123.45, 2)).toBe(123.45);
    expect(roundTo(0.1 + 0.2, 2)).toBe(0.3);
    expect(roundTo(1.5e-7, 8)).toBe(1.5e-7);
    expect(roundTo(1.5e-7, 6)).toBe(0);
    expect(Object.is(roundTo(-0, 2), 0)).toBe(true);
    expect(Object.is(roundTo(-0.001, 2), 0)).toBe(true);
  });

  it("counts a fraction's significant digits without its leading zeros", () => {
    expect(stored("number", 0.012_345_678_9, { decimals: 10 })).toBe(0.012_345_678_9);
    expect(stored("number", 12_345.123_456_789_1, { decimals: 10 })).toBe(12_345.123_456_789_1);
    expect(problem("number", 123_456.123_456_789_1, { decimals: 10 })).toMatch(
      /at most 15 significant digits/,
    );
  });

  it("keeps a number that already has no digits past its decimals, however many they are", () => {
    // Shifted by the decimals these pass 1e21, which JavaScript writes with an exponent.
    expect(roundTo(123_456_789_012, 10)).toBe(123_456_789_012);
    expect(roundTo(-1_234_567_890_123.5, 10)).toBe(-1_234_567_890_123.5);
    expect(roundTo(4_000_000_000_000_000, 6)).toBe(4_000_000_000_000_000);
    expect(stored("number", 123_456_789_012.25, { decimals: 10 })).toBe(123_456_789_012.25);
    expect(stored("number", "99999999999.99999999995", { decimals: 10 })).toBe(100_000_000_000);
  });
});

describe("boolean", () => {
  it("takes true and false only", () => {
    expect(stored("boolean", true)).toBe(true);
    expect(stored("boolean", false)).toBe(false);
    for (const value of ["true", 1, 0, "yes", [], {}]) {
      expect(problem("boolean", value)).toBe("must be true or false");
    }
  });
});

describe("date", () => {
  it("takes real calendar dates", () => {
    expect(stored("date", "2026-11-21")).toBe("2026-11-21");
    expect(stored("date", "2024-02-29")).toBe("2024-02-29");
    expect(stored("date", "2000-02-29")).toBe("2000-02-29");
    expect(stored("date", "0001-01-01")).toBe("0001-01-01");
    expect(stored("date", "9999-12-31")).toBe("9999-12-31");
    expect(stored("date", " 2026-01-31 ")).toBe("2026-01-31");
  });

  it.each([
    "2026-02-30",
    "2026-02-29",
    "1900-02-29",
    "2026-04-31",
    "2026-13-01",
    "2026-00-10",
    "2026-01-00",
    "0000-01-01",
  ])("refuses the impossible date %s", (value) => {
    expect(problem("date", value)).toBe("must be a real calendar date (years 1-9999)");
  });

  it.each([
    "2026-1-5",
    "26-01-05",
    "2026/01/05",
    "2026-01-05T00:00:00Z",
    "20260105",
    "+2026-01-05",
  ])("refuses the malformed date %s", (value) => {
    expect(problem("date", value)).toBe("must be a date string YYYY-MM-DD");
  });

  it("refuses non-strings", () => {
    expect(problem("date", 20260105)).toBe("must be a date string YYYY-MM-DD");
    expect(problem("date", new Date())).toBe("must be a date string YYYY-MM-DD");
  });
});

describe("datetime", () => {
  it("takes RFC 3339 and stores UTC with milliseconds", () => {
    expect(stored("datetime", "2026-11-21T10:15:00Z")).toBe("2026-11-21T10:15:00.000Z");
    expect(stored("datetime", "2026-11-21T10:15:00.123456789Z")).toBe("2026-11-21T10:15:00.123Z");
    expect(stored("datetime", "2026-11-21T10:15:00.5+02:00")).toBe("2026-11-21T08:15:00.500Z");
    expect(stored("datetime", "2026-11-21t23:30:00-05:30")).toBe("2026-11-22T05:00:00.000Z");
    expect(stored("datetime", "2026-11-21 10:15:00z")).toBe("2026-11-21T10:15:00.000Z");
    expect(stored("datetime", "2024-02-29T00:00:00-00:00")).toBe("2024-02-29T00:00:00.000Z");
    expect(stored("datetime", "0050-06-01T00:00:00Z")).toBe("0050-06-01T00:00:00.000Z");
    expect(stored("datetime", "2024-02-29T23:59:59.999Z")).toBe("2024-02-29T23:59:59.999Z");
    expect(stored("datetime", "9999-12-31T23:59:59.999Z")).toBe("9999-12-31T23:59:59.999Z");
  });

  it.each([
    "2026-11-21",
    "2026-11-21T10:15Z",
    "2026-11-21T10:15:00",
    "2026-02-30T10:15:00Z",
    "2026-11-21T24:00:00Z",
    "2026-11-21T10:60:00Z",
    "2026-11-21T10:15:60Z",
    "2026-11-21T10:15:00+24:00",
    "2026-11-21T10:15:00+02:60",
    "2026-11-21T10:15:00+0200",
    "Sat, 21 Nov 2026 10:15:00 GMT",
    "1763720100000",
    // In the stored form, which is taken without parsing it apart when it reads back the same.
    "2026-02-29T10:15:00.000Z",
    "2026-04-31T10:15:00.000Z",
    "2026-11-21T24:00:00.000Z",
    "2026-11-21T10:15:60.000Z",
  ])("refuses %s", (value) => {
    expect(problem("datetime", value)).toBe(
      "must be an RFC 3339 date-time such as 2026-11-21T10:15:00Z",
    );
  });

  it("refuses instants outside the years 1-9999 in UTC", () => {
    expect(problem("datetime", "9999-12-31T23:00:00-05:00")).toBe(
      "must lie in the years 1-9999 (UTC)",
    );
    expect(problem("datetime", "0001-01-01T00:00:00+01:00")).toBe(
      "must lie in the years 1-9999 (UTC)",
    );
  });

  it("refuses non-strings", () => {
    expect(problem("datetime", 1763720100000)).toMatch(/RFC 3339/);
  });
});

describe("selects", () => {
  const choices = {
    choices: [
      { id: "a", name: "Red" },
      { id: "b", name: "Blue, dark" },
      { id: "c", name: "ÉTÉ" },
    ],
  };

  it("takes a choice name, exactly or regardless of case, and stores its spelling", () => {
    expect(stored("single_select", "Red", choices)).toBe("Red");
    expect(stored("single_select", " red ", choices)).toBe("Red");
    expect(stored("single_select", "été", choices)).toBe("ÉTÉ");
    expect(stored("single_select", "Blue, dark", choices)).toBe("Blue, dark");
  });

  it("refuses other names and shapes", () => {
    expect(problem("single_select", "Green", choices)).toBe("is not a choice of this field");
    expect(problem("single_select", "a", choices)).toBe("is not a choice of this field");
    expect(problem("single_select", ["Red"], choices)).toBe("must be a choice name (a string)");
    expect(problem("single_select", "Red", {})).toBe("is not a choice of this field");
  });

  it("takes arrays of names for multi_select, without repeats", () => {
    expect(stored("multi_select", ["Red", "ÉTÉ"], choices)).toEqual(["Red", "ÉTÉ"]);
    expect(stored("multi_select", ["red", "Red", "RED", "été"], choices)).toEqual(["Red", "ÉTÉ"]);
    expect(stored("multi_select", [], choices)).toEqual([]);
  });

  it("matches names exactly first, then the first choice regardless of case", () => {
    const cased = {
      choices: [
        { id: "1", name: "red" },
        { id: "2", name: "Red" },
        { id: "3", name: "RED" },
        { id: "4", name: "Blue" },
      ],
    };
    expect(stored("single_select", "Red", cased)).toBe("Red");
    expect(stored("single_select", "rED", cased)).toBe("red");
    expect(stored("multi_select", ["RED", "blue", " red "], cased)).toEqual(["RED", "Blue", "red"]);
    expect(problem("multi_select", ["Green"], cased)).toBe("item 0 is not a choice of this field");
  });

  it("refuses anything else for multi_select", () => {
    expect(problem("multi_select", "Red", choices)).toBe("must be an array of choice names");
    expect(problem("multi_select", ["Red", "Green"], choices)).toBe(
      "item 1 is not a choice of this field",
    );
    expect(problem("multi_select", ["Red", 1], choices)).toBe(
      "item 1 must be a choice name (a string)",
    );
    expect(problem("multi_select", { 0: "Red" }, choices)).toBe("must be an array of choice names");
  });
});

describe("email", () => {
  it.each([
    ["ada@example.com", "ada@example.com"],
    [" Ada.Lovelace+tag@Sub.Example.co.uk ", "Ada.Lovelace+tag@Sub.Example.co.uk"],
    ["o'brien@example.ie", "o'brien@example.ie"],
    ["jörg@müller.de", "jörg@müller.de"],
    ["x@xn--mller-kva.de", "x@xn--mller-kva.de"],
  ])("takes %s", (value, expected) => {
    expect(stored("email", value)).toBe(expected);
  });

  it.each([
    "plainaddress",
    "@example.com",
    "ada@",
    "ada@example",
    "ada@example.c",
    "ada@example.123",
    "ada@@example.com",
    "ada example@example.com",
    "ada..x@example.com",
    ".ada@example.com",
    "ada.@example.com",
    "ada@-example.com",
    "ada@example-.com",
    "ada@exa_mple.com",
    "ada@example..com",
    `${"x".repeat(65)}@example.com`,
    `ada@${"x".repeat(250)}.com`,
    "ada@example.com\u0000",
  ])("refuses %s", (value) => {
    expect(validateValue(field("email"), value).ok).toBe(false);
  });

  it("refuses non-strings", () => {
    expect(problem("email", 5)).toMatch(/e-mail/);
  });
});

describe("url", () => {
  it.each([
    "https://example.com",
    "http://localhost:8080/path?q=1#frag",
    "https://user:pw@example.com/a%20b",
    "https://bücher.de/straße",
    "http://127.0.0.1",
  ])("takes %s", (value) => {
    expect(stored("url", ` ${value} `)).toBe(value);
  });

  it.each([
    "example.com",
    "ftp://example.com/file",
    "javascript:alert(1)",
    "mailto:ada@example.com",
    "data:text/plain,hi",
    "file:///etc/passwd",
    "https://",
    "http://exa mple.com",
    "https://example.com/\u0000",
    "https://example.com/a\nb",
    `https://example.com/${"x".repeat(2048)}`,
  ])("refuses %s", (value) => {
    expect(validateValue(field("url"), value).ok).toBe(false);
  });
});

describe("phone", () => {
  it.each([
    "+1 (555) 123-4567",
    "030 1234567",
    "+44.20.7946.0958",
    "555-1234 x12",
    "+49 30 1234567 ext. 99",
    "112",
  ])("takes %s", (value) => {
    expect(stored("phone", value)).toBe(value);
  });

  it.each([
    "12",
    "phone",
    "+1 555 CALL NOW",
    "1".repeat(21),
    "++1 555",
    "555-1234 x",
    `${"1 ".repeat(21)}`,
    "555\u00001234",
  ])("refuses %s", (value) => {
    expect(validateValue(field("phone"), value).ok).toBe(false);
  });
});

describe("json", () => {
  it("takes any JSON value and keeps it as it is", () => {
    for (const value of [0, -1.5, true, false, "text", [1, "a", null], { a: { b: [1, 2] } }, {}]) {
      expect(stored("json", value)).toEqual(value);
    }
    const withProto = JSON.parse('{"__proto__": {"admin": true}, "a": 1}');
    const result = stored("json", withProto) as Record<string, unknown>;
    expect(Object.keys(result)).toEqual(["__proto__", "a"]);
    expect(JSON.stringify(result)).toBe('{"__proto__":{"admin":true},"a":1}');
    expect(({} as Record<string, unknown>).admin).toBeUndefined();
  });

  it("takes exactly 100 KiB and refuses more", () => {
    const fits = "x".repeat(JSON_MAX_BYTES - 2);
    expect(stored("json", fits)).toBe(fits);
    expect(problem("json", `${fits}x`)).toBe("must be at most 102400 bytes as JSON");
    // Bytes, not characters: 'é' is two bytes in UTF-8.
    expect(problem("json", { a: "é".repeat(JSON_MAX_BYTES / 2) })).toBe(
      "must be at most 102400 bytes as JSON",
    );
  });

  it("refuses values that are not plain JSON", () => {
    expect(problem("json", { a: Number.NaN })).toBe("must not contain NaN or Infinity");
    expect(problem("json", [Number.POSITIVE_INFINITY])).toBe("must not contain NaN or Infinity");
    expect(problem("json", { a: undefined })).toBe("must be plain JSON");
    expect(problem("json", { a: () => 1 })).toBe("must be plain JSON");
    expect(problem("json", new Date())).toBe("must be plain JSON");
    expect(problem("json", 10n)).toBe("must be plain JSON");
    expect(problem("json", { "a\u0000": 1 })).toBe("must not contain NUL characters");
    expect(problem("json", ["\ud800"])).toBe("must be valid Unicode (no unpaired surrogates)");
  });

  it("refuses deep nesting and cycles without overflowing the stack", () => {
    let deep: unknown = 1;
    for (let i = 0; i < 10_000; i++) deep = [deep];
    expect(problem("json", deep)).toBe("must not nest more than 64 levels");
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    expect(problem("json", cycle)).toBe("must not nest more than 64 levels");
    let ok: unknown = 1;
    for (let i = 0; i < 63; i++) ok = { a: ok };
    expect(stored("json", ok)).toBe(ok);
  });
});

describe("isCalendarDate", () => {
  it("knows month lengths and the Gregorian leap years", () => {
    expect(isCalendarDate(2026, 1, 31)).toBe(true);
    expect(isCalendarDate(2026, 4, 31)).toBe(false);
    expect(isCalendarDate(2024, 2, 29)).toBe(true);
    expect(isCalendarDate(2026, 2, 29)).toBe(false);
    expect(isCalendarDate(2000, 2, 29)).toBe(true);
    expect(isCalendarDate(1900, 2, 29)).toBe(false);
  });

  it("refuses month 0 or 13 and day 0, and leaves the years to its callers", () => {
    expect(isCalendarDate(2026, 0, 1)).toBe(false);
    expect(isCalendarDate(2026, 13, 1)).toBe(false);
    expect(isCalendarDate(2026, 1, 0)).toBe(false);
    expect(isCalendarDate(0, 2, 29)).toBe(true);
    expect(isCalendarDate(10_000, 12, 31)).toBe(true);
  });
});
