import { WHERE_OPERATORS } from "@rowbase/kit";

export {
  WHERE_MAX_CONDITIONS,
  WHERE_MAX_DEPTH,
  WHERE_OPERATORS as OPERATORS,
} from "@rowbase/kit";

export type Operator = (typeof WHERE_OPERATORS)[number];

/** Operators whose value is a comma-separated list; `btw` takes exactly two items. */
export const LIST_OPERATORS: ReadonlySet<Operator> = new Set([
  "in",
  "nin",
  "btw",
  "anyof",
  "allof",
  "nanyof",
]);

/** Operators that take no value at all. */
export const VALUELESS_OPERATORS: ReadonlySet<Operator> = new Set([
  "blank",
  "notblank",
  "checked",
  "notchecked",
]);

export function isOperator(text: string): text is Operator {
  return (WHERE_OPERATORS as readonly string[]).includes(text);
}

/** A piece of client text (a reference, a value, a list item) and where it starts (1-based). */
export interface Literal {
  text: string;
  position: number;
}

export type ConditionValue =
  | { kind: "none" }
  | { kind: "single"; value: Literal }
  | { kind: "list"; items: Literal[] };

/** `(ref,op[,value])`. Positions are 1-based character positions in the `where` text. */
export interface ConditionNode {
  kind: "condition";
  ref: Literal;
  operator: Operator;
  operatorPosition: number;
  value: ConditionValue;
  /** Where the condition's "(" is. */
  position: number;
}

/** Two or more operands joined by `~and`, in source order. */
export interface AndNode {
  kind: "and";
  operands: WhereNode[];
}

/** Two or more operands joined by `~or`, in source order. */
export interface OrNode {
  kind: "or";
  operands: WhereNode[];
}

export interface NotNode {
  kind: "not";
  operand: WhereNode;
  position: number;
}

/**
 * A parsed `where`. Parentheses leave no node of their own: `(a~and b)~and c` is an `and` whose
 * first operand is an `and`, which is how the printer knows to put them back.
 */
export type WhereNode = ConditionNode | AndNode | OrNode | NotNode;
