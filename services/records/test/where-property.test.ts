import { WHERE_MAX_LENGTH } from "@rowbase/kit";
import { afterAll, describe, expect, it } from "vitest";
import type { QueryField } from "../src/query/field-reference.js";
import { QueryError } from "../src/query/query-error.js";
import {
  SQL_DATE_PATTERN,
  SQL_DATETIME_PATTERN,
  STORED_SHAPE,
} from "../src/query/value-expression.js";
import type { WhereNode } from "../src/query/where-ast.js";
import { compileWhere } from "../src/query/where-compiler.js";
import { parseWhere } from "../src/query/where-parser.js";
import { printWhere } from "../src/query/where-printer.js";
import {
  integer,
  pick,
  type Random,
  randomText,
  randomTree,
  seededRandom,
  withoutPositions,
} from "./random-where.js";

// Properties over many random inputs, each run reproducible from its seed (a failure names it;
// WHERE_SEED=<seed> runs from there). Together they try well over 100,000 cases per run, most of
// them parser-only and cheap; the hot loops check by hand rather than through expect().
// WHERE_SCALE=<n> multiplies every property's runs for a longer local hunt.

const SCALE = Number(process.env.WHERE_SCALE ?? 1);
const FIRST_SEED = Number(process.env.WHERE_SEED ?? 1);
const RUNS = {
  randomText: 40_000,
  mutated: 25_000,
  roundTrip: 12_000,
  canonical: 12_000,
  compiled: 15_000,
  nested: 3_000,
};
/** Every case the properties below try, counted as they run. */
let cases = 0;

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

/**
 * Runs a property for `runs` seeds and names the seed that breaks it. Most cases end in a thrown
 * QueryError, so stack traces are off while they run (they cost more than the parsing); a
 * failing seed runs once more with them on, for the trace.
 */
function forEachSeed(runs: number, property: (random: Random) => void): void {
  const last = FIRST_SEED + Math.round(runs * SCALE) - 1;
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    for (let seed = FIRST_SEED; seed <= last; seed++) {
      cases++;
      try {
        property(seededRandom(seed));
      } catch (first) {
        Error.stackTraceLimit = limit;
        let error = first;
        try {
          property(seededRandom(seed));
        } catch (again) {
          error = again;
        }
        throw new Error(`seed ${seed}: ${error instanceof Error ? error.message : String(error)}`, {
          cause: error,
        });
      }
    }
  } finally {
    Error.stackTraceLimit = limit;
  }
}

function check(condition: boolean, message: () => string): void {
  if (!condition) throw new Error(message());
}

/** Parses, or checks that the refusal is a QueryError with a position inside the text. */
function parseOrPositionedError(text: string): WhereNode | QueryError {
  try {
    return parseWhere(text);
  } catch (error) {
    if (!(error instanceof QueryError)) throw error;
    check(error.key === "where", () => `key ${error.key}`);
    if (error.position === undefined) {
      check(/^(must not be empty|must be at most 4096 characters)$/.test(error.message), () =>
        JSON.stringify(error.message),
      );
    } else {
      const length = Array.from(text).length;
      check(
        error.position >= 1 && error.position <= length + 1,
        () => `position ${error.position} outside 1..${length + 1} in ${JSON.stringify(text)}`,
      );
      check(error.message.endsWith(` at ${error.position}`), () => error.message);
    }
    return error;
  }
}

/** Compiles, or checks that the refusal is a positioned QueryError; anything else is thrown. */
function compileOrQueryError(tree: WhereNode, offset = 0, parsed = true) {
  try {
    return compileWhere(tree, FIELDS, { paramOffset: offset, now: NOW });
  } catch (error) {
    if (!(error instanceof QueryError)) throw error;
    // A parsed tree knows where each piece was; a generated one has position 0 everywhere.
    check(error.key === "where" && (!parsed || (error.position ?? 0) >= 1), () => error.message);
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
  "{}",
  "",
  SQL_DATE_PATTERN,
  SQL_DATETIME_PATTERN,
  STORED_SHAPE.date,
  STORED_SHAPE.datetime,
]);

function expectOnlyConstants(sql: string): void {
  for (const match of sql.matchAll(/'([^']*)'/g)) {
    const text = match[1]!;
    check(/^[0-9]+$/.test(text) || SQL_CONSTANTS.has(text), () => `literal '${text}' in ${sql}`);
  }
  // Nothing left once the literals are gone could start a comment or a second statement.
  const outside = sql.replaceAll(/'[^']*'/g, "''");
  check(!/;|--|\/\*|\?|\\/.test(outside), () => `suspicious SQL ${sql}`);
}

/** Texts that are only in the tree: none of them may reach the SQL text. */
function clientTexts(node: WhereNode): string[] {
  switch (node.kind) {
    case "condition":
      return node.value.kind === "none"
        ? []
        : node.value.kind === "single"
          ? [node.value.value.text]
          : node.value.items.map((item) => item.text);
    case "not":
      return clientTexts(node.operand);
    case "and":
    case "or":
      return node.operands.flatMap(clientTexts);
  }
}

/** A random string of grammar pieces nested `depth` parentheses or `~not`s deep. */
function nested(random: Random): string {
  const depth = integer(random, 1, 40);
  const open = Array.from({ length: depth }, () =>
    pick(random, ["(", "~not(", "~not ", "( "]),
  ).join("");
  const close = ")".repeat(integer(random, 0, depth + 2));
  return `${open}${pick(random, ["Name,eq,1)", "Age,gt,2)", "(Vip,checked)", ""])}${close}`;
}

describe("where properties", () => {
  afterAll(() => {
    // The CI budget asks for at least 100,000 generated cases per run.
    if (SCALE >= 1) expect(cases).toBeGreaterThanOrEqual(100_000);
  });

  it("parses random text or refuses it with a positioned QueryError, never anything else", () => {
    const reasons = new Set<string>();
    forEachSeed(RUNS.randomText, (random) => {
      const result = parseOrPositionedError(randomSource(random));
      if (result instanceof QueryError) reasons.add(result.reason.replace(/'.*'/, "'...'"));
    });
    // The inputs reach many different refusals, not one early exit.
    expect(reasons.size).toBeGreaterThan(10);
  });

  it("parses mutated filters or refuses them with a positioned QueryError", () => {
    let parsed = 0;
    forEachSeed(RUNS.mutated, (random) => {
      const tree = parseOrPositionedError(mutated(random));
      if (tree instanceof QueryError) return;
      parsed++;
      compileOrQueryError(tree);
    });
    expect(parsed).toBeGreaterThan((RUNS.mutated * SCALE) / 10);
  });

  it("reads back what it prints: parse(print(tree)) is the tree", () => {
    forEachSeed(RUNS.roundTrip, (random) => {
      const tree = randomTree(random, [...REFS, randomText(random)], 4);
      const text = printWhere(tree);
      if (Array.from(text).length > WHERE_MAX_LENGTH) return;
      const reparsed = parseWhere(text);
      const [got, want] = [withoutPositions(reparsed), withoutPositions(tree)];
      check(JSON.stringify(got) === JSON.stringify(want), () => `read back ${text} differently`);
      check(printWhere(reparsed) === text, () => `printed ${text} then ${printWhere(reparsed)}`);
    });
  });

  it("prints what it parsed canonically: print(parse(print(parse(x)))) is print(parse(x))", () => {
    let parsed = 0;
    forEachSeed(RUNS.canonical, (random) => {
      const tree = parseOrPositionedError(mutated(random));
      if (tree instanceof QueryError) return;
      parsed++;
      const text = printWhere(tree);
      const again = parseWhere(text);
      check(printWhere(again) === text, () => `not canonical: ${text} -> ${printWhere(again)}`);
      // The same filter compiles to the same SQL and parameters, whichever spelling was sent.
      const a = compileOrQueryError(tree);
      const b = compileOrQueryError(again);
      check(
        a instanceof QueryError
          ? b instanceof QueryError && a.reason === b.reason
          : !(b instanceof QueryError) &&
              a.sql === b.sql &&
              JSON.stringify(a.params) === JSON.stringify(b.params),
        () => `${text} compiled differently after printing`,
      );
    });
    expect(parsed).toBeGreaterThan((RUNS.canonical * SCALE) / 10);
  });

  it("compiles random trees to SQL that holds no client text, or refuses with QueryError", () => {
    let compiled = 0;
    forEachSeed(RUNS.compiled, (random) => {
      const tree = randomTree(random, REFS, 4);
      const offset = integer(random, 0, 5);
      const result = compileOrQueryError(tree, offset, false);
      if (result instanceof QueryError) return;
      compiled++;
      expectOnlyConstants(result.sql);
      // Placeholders are exactly $offset+1 .. $offset+params, each used once, each cast.
      const used = [...result.sql.matchAll(/\$([0-9]+)::/g)].map((m) => Number(m[1]));
      check(
        used.length === result.params.length && used.every((n, i) => n === offset + i + 1),
        () => `placeholders ${used} for ${result.params.length} params`,
      );
      check(
        !/\$[0-9]+(?!::|[0-9])/.test(result.sql),
        () => `a placeholder without its cast in ${result.sql}`,
      );
      // No value of the filter is in the statement's text, only in its parameters.
      for (const text of clientTexts(tree)) {
        // (Only texts that could break out of SQL or hide in it: a plain word such as "false"
        // may well be part of the statement's own text.)
        if (/['"\\;]|--|\/\*|[^\x20-\x7e]/.test(text)) {
          check(!result.sql.includes(text), () => `${JSON.stringify(text)} in ${result.sql}`);
        }
      }
    });
    expect(compiled).toBeGreaterThan((RUNS.compiled * SCALE) / 20);
  });

  it("refuses deep nesting with a QueryError, never a stack overflow", () => {
    let deep = 0;
    forEachSeed(RUNS.nested, (random) => {
      const result = parseOrPositionedError(nested(random));
      if (result instanceof QueryError && result.reason.startsWith("nested deeper")) deep++;
    });
    expect(deep).toBeGreaterThan((RUNS.nested * SCALE) / 10);
    // The longest filter of nothing but parentheses stops at the depth limit too.
    const error = parseOrPositionedError("(".repeat(WHERE_MAX_LENGTH));
    expect(error).toBeInstanceOf(QueryError);
  });
});
