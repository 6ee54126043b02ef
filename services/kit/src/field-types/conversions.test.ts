import type { JsonObject } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import {
  canChangeType,
  convertValue,
  FIELD_TYPE_NAMES,
  type FieldLike,
  type FieldTypeName,
  typeChangesFrom,
  valueAsText,
} from "./index.js";

const f = (type: FieldTypeName, options: JsonObject = {}): FieldLike => ({ type, options });

function converted(from: FieldLike, to: FieldLike, value: unknown) {
  const result = convertValue(from, to, value);
  if (!result.ok)
    throw new Error(`expected ${JSON.stringify(value)} to convert: ${result.message}`);
  return result.value;
}

function refused(from: FieldLike, to: FieldLike, value: unknown) {
  const result = convertValue(from, to, value);
  if (result.ok) throw new Error(`expected a refusal, got ${JSON.stringify(result.value)}`);
  return result.message;
}

const colours = {
  choices: [
    { id: "r", name: "Red" },
    { id: "g", name: "Green" },
    { id: "b", name: "Blue, dark" },
  ],
};

describe("the type-change table", () => {
  it("lets text become every writable type and back", () => {
    const writable: FieldTypeName[] = [
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
      "long_text",
    ];
    for (const type of writable) {
      expect(canChangeType("text", type)).toBe(true);
      expect(canChangeType(type, "text")).toBe(true);
    }
  });

  it("lets everything but file, link, lookup and rollup become text", () => {
    const kept = ["file", "link", "lookup", "rollup"];
    for (const type of FIELD_TYPE_NAMES) {
      expect(canChangeType(type, "text")).toBe(!kept.includes(type));
      expect(canChangeType(type, "long_text")).toBe(!kept.includes(type));
    }
  });

  it("changes nothing into or out of a link, lookup or rollup", () => {
    for (const relational of ["link", "lookup", "rollup"] as const) {
      for (const other of FIELD_TYPE_NAMES) {
        if (other === relational) continue;
        expect(canChangeType(relational, other)).toBe(false);
        expect(canChangeType(other, relational)).toBe(false);
      }
    }
  });

  it("keeps the same type always", () => {
    for (const type of FIELD_TYPE_NAMES) expect(canChangeType(type, type)).toBe(true);
  });

  it("allows the safe pairs and nothing into a read-only type", () => {
    expect(canChangeType("single_select", "multi_select")).toBe(true);
    expect(canChangeType("multi_select", "single_select")).toBe(true);
    expect(canChangeType("date", "datetime")).toBe(true);
    expect(canChangeType("datetime", "date")).toBe(true);
    expect(canChangeType("autonumber", "number")).toBe(true);
    expect(canChangeType("created_at", "datetime")).toBe(true);
    expect(canChangeType("updated_at", "date")).toBe(true);
    for (const to of ["file", "autonumber", "created_at", "updated_at"] as const) {
      for (const from of FIELD_TYPE_NAMES) {
        if (from !== to) expect(canChangeType(from, to)).toBe(false);
      }
    }
  });

  it("refuses pairs without a conversion", () => {
    const refusedPairs: [FieldTypeName, FieldTypeName][] = [
      ["number", "boolean"],
      ["number", "date"],
      ["boolean", "number"],
      ["email", "url"],
      ["url", "phone"],
      ["json", "number"],
      ["single_select", "number"],
      ["date", "number"],
      ["file", "text"],
      ["file", "json"],
      ["number", "single_select"],
      ["datetime", "created_at"],
    ];
    for (const [from, to] of refusedPairs) expect(canChangeType(from, to)).toBe(false);
    expect(typeChangesFrom("file")).toEqual(["file"]);
    expect(typeChangesFrom("number")).toEqual(["text", "long_text", "number"]);
  });
});

describe("convertValue", () => {
  it("keeps null and refuses pairs without a conversion", () => {
    expect(converted(f("text"), f("number"), null)).toBeNull();
    expect(converted(f("text"), f("number"), undefined)).toBeNull();
    expect(refused(f("number"), f("boolean"), 1)).toBe("cannot convert number to boolean");
    expect(refused(f("file"), f("text"), { name: "a" })).toBe("cannot convert file to text");
  });

  it("shows values as text", () => {
    expect(converted(f("number", { decimals: 2 }), f("text"), 3.5)).toBe("3.50");
    expect(converted(f("number"), f("text"), 1e21)).toBe("1e+21");
    expect(converted(f("boolean"), f("text"), false)).toBe("false");
    expect(converted(f("date"), f("text"), "2026-11-21")).toBe("2026-11-21");
    expect(converted(f("multi_select", colours), f("long_text"), ["Red", "Green"])).toBe(
      "Red, Green",
    );
    expect(converted(f("json"), f("text"), { a: [1, "x"] })).toBe('{"a":[1,"x"]}');
    expect(converted(f("json"), f("text"), "plain")).toBe("plain");
    expect(converted(f("autonumber"), f("text"), 17)).toBe("17");
    expect(converted(f("created_at"), f("text"), "2026-11-21T10:15:00.000Z")).toBe(
      "2026-11-21T10:15:00.000Z",
    );
    expect(valueAsText(f("single_select"), "Red")).toBe("Red");
  });

  it("refuses text longer than the new limit", () => {
    expect(converted(f("long_text"), f("text"), "short")).toBe("short");
    expect(refused(f("long_text"), f("text"), "x".repeat(10_001))).toBe(
      "must be at most 10000 characters",
    );
    expect(refused(f("text"), f("text", { max_length: 3 }), "abcd")).toBe(
      "must be at most 3 characters",
    );
    expect(refused(f("json"), f("text", { max_length: 5 }), { abc: 1 })).toMatch(/at most 5/);
  });

  it("parses text as numbers", () => {
    expect(converted(f("text"), f("number", { decimals: 1 }), " 12.34 ")).toBe(12.3);
    expect(converted(f("text"), f("number"), "   ")).toBeNull();
    expect(refused(f("text"), f("number"), "twelve")).toBe("must be a number");
    expect(refused(f("text"), f("number", { max: 5 }), "6")).toBe("must be at most 5");
  });

  it("parses text as booleans", () => {
    for (const word of ["true", "Yes", "Y", "1", "on", "CHECKED"]) {
      expect(converted(f("text"), f("boolean"), word)).toBe(true);
    }
    for (const word of ["false", "no", "N", "0", "off", "unchecked"]) {
      expect(converted(f("text"), f("boolean"), word)).toBe(false);
    }
    expect(converted(f("text"), f("boolean"), "")).toBeNull();
    expect(refused(f("text"), f("boolean"), "maybe")).toBe("must be true or false");
  });

  it("parses text as dates and date-times", () => {
    expect(converted(f("text"), f("date"), " 2026-11-21 ")).toBe("2026-11-21");
    expect(refused(f("text"), f("date"), "2026-02-30")).toMatch(/calendar/);
    expect(converted(f("text"), f("datetime"), "2026-11-21T10:15:00+01:00")).toBe(
      "2026-11-21T09:15:00.000Z",
    );
    expect(converted(f("text"), f("datetime"), "2026-11-21")).toBe("2026-11-21T00:00:00.000Z");
    expect(refused(f("text"), f("datetime"), "yesterday")).toMatch(/RFC 3339/);
  });

  it("parses text as choices", () => {
    expect(converted(f("text"), f("single_select", colours), "red")).toBe("Red");
    expect(refused(f("text"), f("single_select", colours), "Purple")).toBe(
      "is not a choice of this field",
    );
    expect(converted(f("text"), f("multi_select", colours), "Red, green")).toEqual([
      "Red",
      "Green",
    ]);
    expect(converted(f("text"), f("multi_select", colours), "Blue, dark")).toEqual(["Blue, dark"]);
    expect(converted(f("text"), f("multi_select", colours), " , ")).toEqual([]);
    expect(refused(f("text"), f("multi_select", colours), "Red, Purple")).toBe(
      "item 1 is not a choice of this field",
    );
  });

  it("parses text as e-mails, URLs, phones and JSON strings", () => {
    expect(converted(f("text"), f("email"), " ada@example.com ")).toBe("ada@example.com");
    expect(refused(f("text"), f("email"), "not an email")).toMatch(/e-mail/);
    expect(converted(f("text"), f("url"), "https://example.com")).toBe("https://example.com");
    expect(refused(f("text"), f("url"), "example")).toMatch(/URL/);
    expect(converted(f("text"), f("phone"), "+1 555 0100")).toBe("+1 555 0100");
    expect(refused(f("text"), f("phone"), "call me")).toMatch(/phone/);
    expect(converted(f("text"), f("json"), '{"a":1}')).toBe('{"a":1}');
  });

  it("converts text and long_text both ways", () => {
    expect(converted(f("text"), f("long_text"), "a\nb")).toBe("a\nb");
    expect(converted(f("long_text"), f("number"), "5")).toBe(5);
  });

  it("follows select values by choice id, renames included", () => {
    const renamed = {
      choices: [
        { id: "r", name: "Crimson" },
        { id: "g", name: "Green" },
      ],
    };
    expect(converted(f("single_select", colours), f("single_select", renamed), "Red")).toBe(
      "Crimson",
    );
    expect(converted(f("single_select", colours), f("multi_select", renamed), "Red")).toEqual([
      "Crimson",
    ]);
    expect(
      converted(f("multi_select", colours), f("multi_select", renamed), ["Red", "Green"]),
    ).toEqual(["Crimson", "Green"]);
    expect(converted(f("multi_select", colours), f("single_select", renamed), ["Green"])).toBe(
      "Green",
    );
    expect(converted(f("multi_select", colours), f("single_select", renamed), [])).toBeNull();
    expect(refused(f("multi_select", colours), f("single_select", renamed), ["Red", "Green"])).toBe(
      "holds more than one choice",
    );
    // A removed choice does not convert, not even when another choice took its name.
    expect(refused(f("single_select", colours), f("single_select", renamed), "Blue, dark")).toBe(
      'its choice "Blue, dark" was removed',
    );
    const tookItsName = { choices: [{ id: "r", name: "blue, DARK" }] };
    for (const [type, value] of [
      ["single_select", "Blue, dark"],
      ["multi_select", ["Red", "Blue, dark"]],
    ] as const) {
      expect(refused(f(type, colours), f(type, tookItsName), value)).toBe(
        'its choice "Blue, dark" was removed',
      );
    }
    // A value that was no choice of the old options is checked against the new ones by name.
    expect(refused(f("single_select", colours), f("single_select", renamed), "Purple")).toBe(
      "is not a choice of this field",
    );
  });

  it("swaps two choice names correctly", () => {
    const swapped = {
      choices: [
        { id: "r", name: "Green" },
        { id: "g", name: "Red" },
      ],
    };
    expect(
      converted(f("multi_select", colours), f("multi_select", swapped), ["Red", "Green"]),
    ).toEqual(["Green", "Red"]);
  });

  it("converts between dates and date-times in UTC", () => {
    expect(converted(f("date"), f("datetime"), "2026-11-21")).toBe("2026-11-21T00:00:00.000Z");
    expect(converted(f("datetime"), f("date"), "2026-11-21T23:30:00.000Z")).toBe("2026-11-21");
    expect(converted(f("created_at"), f("date"), "2026-11-21T23:30:00.000Z")).toBe("2026-11-21");
    expect(converted(f("updated_at"), f("datetime"), "2026-11-21T23:30:00.000Z")).toBe(
      "2026-11-21T23:30:00.000Z",
    );
    expect(refused(f("datetime"), f("date"), "garbage")).toBe("must be a date-time");
  });

  it("turns autonumbers into numbers with the new options", () => {
    expect(converted(f("autonumber"), f("number"), 42)).toBe(42);
    expect(refused(f("autonumber"), f("number", { max: 10 }), 42)).toBe("must be at most 10");
  });

  it("checks same-type values against new options", () => {
    expect(converted(f("number", { decimals: 2 }), f("number", { decimals: 0 }), 2.5)).toBe(3);
    expect(refused(f("number"), f("number", { min: 10 }), 5)).toBe("must be at least 10");
    expect(converted(f("autonumber"), f("autonumber"), 7)).toBe(7);
    expect(converted(f("file"), f("file"), { file_id: 1 })).toEqual({ file_id: 1 });
  });
});
