/**
 * Test support: seeded random `where` trees and texts for the property tests (unit and against
 * PostgreSQL). Not exported from the package. Every run is reproducible from its seed, which the
 * tests print on failure.
 */
import {
  type ConditionNode,
  type ConditionValue,
  LIST_OPERATORS,
  type Literal,
  OPERATORS,
  VALUELESS_OPERATORS,
  type WhereNode,
} from "../src/query/where-ast.js";

export type Random = () => number;

/** mulberry32: small, fast and good enough to explore inputs. */
export function seededRandom(seed: number): Random {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function pick<T>(random: Random, items: readonly T[]): T {
  return items[Math.floor(random() * items.length)]!;
}

export function integer(random: Random, min: number, max: number): number {
  return min + Math.floor(random() * (max - min + 1));
}

/** Pieces that stress the grammar and the SQL: delimiters, quotes, escapes, unicode. */
const TEXT_PIECES = [
  "a",
  "Z",
  "0",
  "42",
  "-1.5",
  "1e3",
  " ",
  "\t",
  ",",
  ")",
  "(",
  '"',
  '""',
  "'",
  "~",
  "~and",
  "~or",
  "~not",
  "%",
  "_",
  "\\",
  ";",
  "--",
  "/*",
  "$1",
  "?",
  "today",
  "daysAgo:3",
  "2026-11-21",
  "2026-11-21T10:15:00Z",
  "true",
  "é",
  "😀",
  "\u200b",
  "__proto__",
  "drop table record",
  "\n",
  "\r",
  "\u00a0",
  "\u2028",
  "\ufeff",
  "NaN",
  "1e309",
  "-0",
  "9223372036854775808",
  "daysAgo:99999999999",
  "0000-01-01",
  "275760-09-13",
  "2026-02-30",
  "2026-11-21T24:00:00Z",
  "constructor",
  "$$",
  "E'",
];

export function randomText(random: Random, maxPieces = 4): string {
  const count = integer(random, 1, maxPieces);
  let text = "";
  for (let i = 0; i < count; i++) text += pick(random, TEXT_PIECES);
  return text;
}

/** A text that parses as a value of the given kind, or anything at all. */
export function randomValue(random: Random): string {
  return pick(random, [
    () => randomText(random),
    () => String(integer(random, -50, 50)),
    () => (random() * 200 - 100).toFixed(integer(random, 0, 3)),
    () => pick(random, ["today", "yesterday", "tomorrow", `daysAgo:${integer(random, 0, 30)}`]),
    () =>
      `2026-${String(integer(random, 1, 12)).padStart(2, "0")}-${String(integer(random, 1, 28)).padStart(2, "0")}`,
    () =>
      `2026-11-${String(integer(random, 10, 28))}T${String(integer(random, 0, 23)).padStart(2, "0")}:00:00Z`,
    () => pick(random, ["true", "false", "a", "b", "c", "Active", "Done"]),
  ])();
}

function literal(text: string): Literal {
  return { text, position: 0 };
}

export function randomCondition(random: Random, refs: readonly string[]): ConditionNode {
  const operator = pick(random, OPERATORS);
  let value: ConditionValue;
  if (VALUELESS_OPERATORS.has(operator)) {
    value = { kind: "none" };
  } else if (LIST_OPERATORS.has(operator)) {
    const count = operator === "btw" ? 2 : integer(random, 1, 3);
    value = {
      kind: "list",
      items: Array.from({ length: count }, () => literal(randomValue(random))),
    };
  } else {
    value = { kind: "single", value: literal(randomValue(random)) };
  }
  return {
    kind: "condition",
    ref: literal(pick(random, refs)),
    operator,
    operatorPosition: 0,
    value,
    position: 0,
  };
}

/** A random tree at most `depth` levels deep, within the parser's limits when depth <= 4. */
export function randomTree(random: Random, refs: readonly string[], depth: number): WhereNode {
  const roll = random();
  if (depth <= 1 || roll < 0.4) return randomCondition(random, refs);
  if (roll < 0.55)
    return { kind: "not", operand: randomTree(random, refs, depth - 1), position: 0 };
  const operands = Array.from({ length: integer(random, 2, 3) }, () =>
    randomTree(random, refs, depth - 1),
  );
  return { kind: roll < 0.8 ? "and" : "or", operands };
}

/** The tree with every position set to 0, to compare trees whatever their source text. */
export function withoutPositions(node: WhereNode): WhereNode {
  switch (node.kind) {
    case "condition": {
      const value: ConditionValue =
        node.value.kind === "none"
          ? node.value
          : node.value.kind === "single"
            ? { kind: "single", value: literal(node.value.value.text) }
            : { kind: "list", items: node.value.items.map((item) => literal(item.text)) };
      return {
        ...node,
        ref: literal(node.ref.text),
        operatorPosition: 0,
        value,
        position: 0,
      };
    }
    case "not":
      return { kind: "not", operand: withoutPositions(node.operand), position: 0 };
    case "and":
    case "or":
      return { kind: node.kind, operands: node.operands.map(withoutPositions) };
  }
}

/** Operators by the kind of value a reference holds, for fitting trees. */
const FITTING_OPERATORS: Record<string, readonly string[]> = {
  text: [
    "eq",
    "neq",
    "gt",
    "gte",
    "lt",
    "lte",
    "btw",
    "in",
    "nin",
    "blank",
    "notblank",
    "like",
    "nlike",
  ],
  number: ["eq", "neq", "gt", "gte", "lt", "lte", "btw", "in", "nin", "blank", "notblank"],
  date: ["eq", "neq", "gt", "gte", "lt", "lte", "btw", "in", "nin", "blank", "notblank"],
  boolean: ["eq", "neq", "checked", "notchecked", "blank", "notblank"],
  single_select: [
    "eq",
    "neq",
    "in",
    "nin",
    "anyof",
    "nanyof",
    "like",
    "nlike",
    "blank",
    "notblank",
  ],
  multi_select: ["anyof", "allof", "nanyof", "blank", "notblank"],
  other: ["blank", "notblank"],
};

const KIND_OF_TYPE: Record<string, string> = {
  text: "text",
  long_text: "text",
  email: "text",
  url: "text",
  phone: "text",
  number: "number",
  autonumber: "number",
  date: "date",
  datetime: "date",
  created_at: "date",
  updated_at: "date",
  boolean: "boolean",
  single_select: "single_select",
  multi_select: "multi_select",
};

/** Values of each kind that parse, the edges of their ranges among them. */
function fittingValue(random: Random, kind: string): string {
  switch (kind) {
    case "number":
      return pick(random, [
        () => String(integer(random, -100, 100)),
        () => (random() * 1000 - 500).toFixed(integer(random, 0, 6)),
        () =>
          pick(random, [
            "1e308",
            "-1e308",
            "1.7976931348623157e308",
            "5e-324",
            "-0",
            "0.1",
            ".5",
            "5.",
            "+3",
            "9007199254740993",
            "123456789012345678901234567890",
            "1E-10",
          ]),
      ])();
    case "date":
      return pick(random, [
        () =>
          `${String(integer(random, 1, 9999)).padStart(4, "0")}-${String(integer(random, 1, 12)).padStart(2, "0")}-${String(integer(random, 1, 28)).padStart(2, "0")}`,
        () =>
          pick(random, [
            "0001-01-01",
            "9999-12-31",
            "2024-02-29",
            "9999-12-31T23:59:59.999Z",
            "0001-01-01T00:00:00Z",
            "0001-01-01T00:30:00+01:00",
            "9999-12-31T23:30:00-01:00",
            "2026-11-21T10:15:00.123456789Z",
            "2026-11-21 10:15:00z",
            "today",
            "YESTERDAY",
            "tomorrow",
            `daysAgo:${integer(random, 0, 9_999_999)}`,
            `daysFromNow:${integer(random, 0, 3_000_000)}`,
            "daysAgo:739000",
            "daysFromNow:2900000",
          ]),
      ])();
    case "boolean":
      return pick(random, ["true", "false", "1", "0", "TRUE"]);
    case "single_select":
    case "multi_select":
      return pick(random, ["Active", "active", "Done", "a", "b", "a,b", "c", "zz"]);
    default:
      return randomText(random);
  }
}

/** A condition whose operator fits the reference and whose values parse, mostly. */
export function randomFittingCondition(
  random: Random,
  refs: readonly { ref: string; type: string }[],
): ConditionNode {
  const target = pick(random, refs);
  const kind = KIND_OF_TYPE[target.type] ?? "other";
  const operator = pick(random, FITTING_OPERATORS[kind]!) as ConditionNode["operator"];
  const value = () => literal(fittingValue(random, kind));
  let conditionValue: ConditionValue;
  if (VALUELESS_OPERATORS.has(operator)) conditionValue = { kind: "none" };
  else if (LIST_OPERATORS.has(operator)) {
    const count = operator === "btw" ? 2 : integer(random, 1, 4);
    conditionValue = { kind: "list", items: Array.from({ length: count }, value) };
  } else conditionValue = { kind: "single", value: value() };
  return {
    kind: "condition",
    ref: literal(target.ref),
    operator,
    operatorPosition: 0,
    value: conditionValue,
    position: 0,
  };
}

/** A random tree of fitting conditions at most `depth` levels deep. */
export function randomFittingTree(
  random: Random,
  refs: readonly { ref: string; type: string }[],
  depth: number,
): WhereNode {
  const roll = random();
  if (depth <= 1 || roll < 0.4) return randomFittingCondition(random, refs);
  if (roll < 0.55) {
    return { kind: "not", operand: randomFittingTree(random, refs, depth - 1), position: 0 };
  }
  const operands = Array.from({ length: integer(random, 2, 3) }, () =>
    randomFittingTree(random, refs, depth - 1),
  );
  return { kind: roll < 0.8 ? "and" : "or", operands };
}
