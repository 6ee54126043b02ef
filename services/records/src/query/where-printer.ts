import type { ConditionNode, WhereNode } from "./where-ast.js";

const WHITESPACE_AT_ENDS = /^[ \t\n\r]|[ \t\n\r]$/;

/** A literal as `where` text: raw when it reads back the same, else double-quoted. */
function printLiteral(
  text: string,
  stops: string,
  mayStartWith: (char: string) => boolean,
): string {
  const raw =
    text !== "" &&
    !WHITESPACE_AT_ENDS.test(text) &&
    mayStartWith(text[0]!) &&
    ![...stops].some((stop) => text.includes(stop));
  return raw ? text : `"${text.replaceAll('"', '""')}"`;
}

const notQuote = (char: string) => char !== '"';
const startsReference = (char: string) => char !== '"' && char !== "(" && char !== "~";

function printCondition(node: ConditionNode): string {
  const ref = printLiteral(node.ref.text, ",)", startsReference);
  let value = "";
  if (node.value.kind === "single")
    value = `,${printLiteral(node.value.value.text, ")", notQuote)}`;
  if (node.value.kind === "list") {
    value = node.value.items.map((item) => `,${printLiteral(item.text, ",)", notQuote)}`).join("");
  }
  return `(${ref},${node.operator}${value})`;
}

/**
 * The canonical `where` text of a tree: `parseWhere(printWhere(tree))` gives the same tree
 * (positions aside). Groups are printed only where the tree needs them, which is also how a
 * service can echo a normalised filter back.
 */
export function printWhere(node: WhereNode): string {
  switch (node.kind) {
    case "condition":
      return printCondition(node);
    case "not":
      return `~not${printOperand(node.operand, false)}`;
    case "and":
      return node.operands.map((operand) => printOperand(operand, false)).join("~and");
    case "or":
      return node.operands.map((operand) => printOperand(operand, true)).join("~or");
  }
}

/** An operand in parentheses when it would otherwise join the surrounding chain. */
function printOperand(node: WhereNode, insideOr: boolean): string {
  const grouped = node.kind === "or" || (node.kind === "and" && !insideOr);
  return grouped ? `(${printWhere(node)})` : printWhere(node);
}
