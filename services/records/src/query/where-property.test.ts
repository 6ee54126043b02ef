import { describe, expect, it } from "vitest";
import type { QueryField } from "./field-reference.js";
import { QueryError } from "./query-error.js";
import {
  integer,
  pick,
  type Random,
  randomText,
  randomTree,
  seededRandom,
  withoutPositions,
} from "./random-where.js";
import { SQL_DATE_PATTERN, SQL_DATETIME_PATTERN } from "./value-expression.js";
import { WHERE_MAX_LENGTH, type WhereNode } from "./where-ast.js";
import { compileWhere } from "./where-compiler.js";
import { parseWhere } from "./where-parser.js";
import { printWhere } from "./where-printer.js";

// Properties over many random inputs, each run reproducible from its seed.

const RUNS = 3000;

const FIELDS: QueryField[] = [
  { id: "1", name: "Name", type: "text" },
  { id: "2", name: "Age", type: "number" },
  { id: "3", name: "Vip", type: "boolean" },
  { id: "4", name: "Due", type: "date" },
  { id: "5", name: "At", type: "datetime" },
  { id: "6", name: "Status", type: "single_select" },
  { id: "7", name: "Tags", type: "multi_select" },
  { id: "8", name: "Meta", type: "json" },
  { id: "9", name: "Seq", type: "autonumber" },
  { id: "10", name: "Created", type: "created_at" },
  { id: "11", name: "Doc", type: "file" },
  { id: "12", name: `We'ird; "name", (1) ~or`, type: "text" },
];
const REFS = [
  ...FIELDS.map((f) => f.name),
  ...FIELDS.map((f) => f.id),
  "row_id",
  "created_at",
  "updated_at",
  "unknown field",
  "99",
];
const NOW = new Date("2026-11-21T10:15:00Z");

/** Characters that drive the grammar into every corner, plus ones it must refuse. */
const ALPHABET = [
  ...'(),~"  \t\n',
  "~and",
  "~or",
  "~not",
  "Name",
  "Age",
  "eq",
  "in",
  "btw",
  "blank",
  "anyof",
  "1",
  "x",
  "😀",
  "\u0000",
  "\ud800",
  "''",
];

function randomSource(random: Random): string {
  const length = integer(random, 0, 60);
  let text = "";
  for (let i = 0; i < length; i++) text += pick(random, ALPHABET);
  return text;
}

/** A valid filter with a few characters inserted, deleted or replaced. */
function mutated(random: Random): string {
  const chars = Array.from(printWhere(randomTree(random, REFS, 4)));
  for (let n = integer(random, 1, 3); n > 0; n--) {
    const at = integer(random, 0, chars.length);
    const roll = random();
    if (roll < 0.33) chars.splice(at, 1);
    else if (roll < 0.66) chars.splice(at, 0, pick(random, ALPHABET));
    else chars[at] = pick(random, ALPHABET);
  }
  return chars.join("");
}

/** Runs a property for RUNS seeds and names the seed that breaks it. */
function forEachSeed(property: (random: Random) => void): void {
  for (let seed = 1; seed <= RUNS; seed++) {
    try {
      property(seededRandom(seed));
    } catch (error) {
      throw new Error(`seed ${seed}: ${error instanceof Error ? error.message : String(error)}`, {
        cause: error,
      });
    }
  }
}

/** Parses, or checks that the refusal is a QueryError with a position inside the text. */
function parseOrPositionedError(text: string): WhereNode | QueryError {
  try {
    return parseWhere(text);
  } catch (error) {
    if (!(error instanceof QueryError)) throw error;
    expect(error.key).toBe("where");
    if (error.position === undefined) {
      expect(error.message).toMatch(/^(must not be empty|must be at most 4096 characters)$/);
    } else {
      expect(error.position).toBeGreaterThanOrEqual(1);
      expect(error.position).toBeLessThanOrEqual(Array.from(text).length + 1);
      expect(error.message.endsWith(` at ${error.position}`)).toBe(true);
    }
    return error;
  }
}

/** Every quoted literal the compiler may write; anything else in quotes would be client text. */
const SQL_CONSTANTS = new Set([
  "number",
  "string",
  "boolean",
  "array",
  "null",
  '""',
  "[]",
  "",
  SQL_DATE_PATTERN,
  SQL_DATETIME_PATTERN,
]);

function expectOnlyConstants(sql: string): void {
  for (const match of sql.matchAll(/'([^']*)'/g)) {
    const text = match[1]!;
    if (!/^[0-9]+$/.test(text)) expect(SQL_CONSTANTS, sql).toContain(text);
  }
  // Nothing left once the literals are gone could start a comment or a second statement.
  const outside = sql.replaceAll(/'[^']*'/g, "''");
  expect(outside).not.toMatch(/;|--|\/\*|\?|\\/);
}

describe("where properties", () => {
  it("parses random text or refuses it with a positioned QueryError, never anything else", () => {
    const reasons = new Set<string>();
    forEachSeed((random) => {
      const result = parseOrPositionedError(randomSource(random));
      if (result instanceof QueryError) reasons.add(result.reason.replace(/'.*'/, "'...'"));
    });
    // The inputs reach many different refusals, not one early exit.
    expect(reasons.size).toBeGreaterThan(10);
  });

  it("parses mutated filters or refuses them with a positioned QueryError", () => {
    let parsed = 0;
    forEachSeed((random) => {
      const tree = parseOrPositionedError(mutated(random));
      if (tree instanceof QueryError) return;
      parsed++;
      try {
        compileWhere(tree, FIELDS, { paramOffset: 0, now: NOW });
      } catch (error) {
        if (!(error instanceof QueryError)) throw error;
        expect(error.position).toBeGreaterThanOrEqual(1);
      }
    });
    expect(parsed).toBeGreaterThan(RUNS / 10);
  });

  it("reads back what it prints: parse(print(tree)) is the tree", () => {
    forEachSeed((random) => {
      const tree = randomTree(random, [...REFS, randomText(random)], 4);
      const text = printWhere(tree);
      if (Array.from(text).length > WHERE_MAX_LENGTH) return;
      const reparsed = parseWhere(text);
      expect(withoutPositions(reparsed)).toEqual(tree);
      expect(printWhere(reparsed)).toBe(text);
    });
  });

  it("compiles random trees to SQL that holds no client text, or refuses with QueryError", () => {
    let compiled = 0;
    forEachSeed((random) => {
      const tree = randomTree(random, REFS, 4);
      const offset = integer(random, 0, 5);
      try {
        const result = compileWhere(tree, FIELDS, { paramOffset: offset, now: NOW });
        compiled++;
        expectOnlyConstants(result.sql);
        // Placeholders are exactly $offset+1 .. $offset+params, each used once.
        const used = [...result.sql.matchAll(/\$([0-9]+)::/g)].map((m) => Number(m[1]));
        expect(used).toEqual(result.params.map((_, i) => offset + i + 1));
      } catch (error) {
        if (!(error instanceof QueryError)) throw error;
      }
    });
    expect(compiled).toBeGreaterThan(RUNS / 20);
  });
});
