import { WHERE_MAX_LENGTH } from "@rowbase/kit";
import { QueryError, quoteForMessage } from "./query-error.js";
import {
  type ConditionNode,
  type ConditionValue,
  isOperator,
  LIST_OPERATORS,
  type Literal,
  VALUELESS_OPERATORS,
  WHERE_MAX_CONDITIONS,
  WHERE_MAX_DEPTH,
  type WhereNode,
} from "./where-ast.js";
import { type StructureToken, WhereLexer } from "./where-lexer.js";

/**
 * Parses a `where` expression into its syntax tree, or throws a positioned
 * QueryError. It checks the syntax and the limits only; fields, value types and operator fit
 * are the compiler's, which knows the table.
 *
 *   expr := term (("~and" | "~or") term)*   ~and binds tighter than ~or, both left to right
 *   term := "~not" term | "(" expr ")" | cond
 *   cond := "(" ref "," op ["," value] ")"
 *
 * Choices the grammar leaves open:
 * - "(" starts a group when the next non-blank character is "(" or "~", else a condition. So an
 *   unquoted reference cannot start with "(", "~" or '"', nor hold "," or ")"; a reference may
 *   be quoted like a value (`("Size (cm), net",gt,3)`). An all-digit reference is a field id,
 *   quoted or not.
 * - Whitespace around tokens is ignored; unquoted values and list items are trimmed, quoted ones
 *   are kept exactly. Operators and connectives are matched regardless of case.
 * - An empty value (`(Name,eq,)`, `""`) is an error: emptiness is asked with `blank`.
 * - Depth: each group, each `~not` and each condition's own parentheses count one level, so
 *   `(a,eq,1)` is depth 1 and at most 10 levels nest. Past a limit it stops at once, so the
 *   recursion never goes deeper than the limit.
 */
export function parseWhere(text: string): WhereNode {
  const chars = checkedCharacters(text);
  const parser = new WhereParser(chars);
  return parser.parse();
}

function checkedCharacters(text: string): string[] {
  // More UTF-16 units than twice the limit is more code points than the limit.
  if (text.length > 2 * WHERE_MAX_LENGTH) {
    throw new QueryError("where", `must be at most ${WHERE_MAX_LENGTH} characters`);
  }
  const chars = Array.from(text);
  if (chars.length > WHERE_MAX_LENGTH) {
    throw new QueryError("where", `must be at most ${WHERE_MAX_LENGTH} characters`);
  }
  for (const [index, char] of chars.entries()) {
    // PostgreSQL cannot take NUL in text, and a lone surrogate is not text at all.
    if (char === "\u0000") throw new QueryError("where", "NUL character", index + 1);
    if (!char.isWellFormed()) throw new QueryError("where", "invalid Unicode character", index + 1);
  }
  if (chars.every((c) => c.trim() === "")) throw new QueryError("where", "must not be empty");
  return chars;
}

class WhereParser {
  private readonly lexer: WhereLexer;
  private conditions = 0;

  constructor(chars: readonly string[]) {
    this.lexer = new WhereLexer(chars);
  }

  parse(): WhereNode {
    const node = this.expression(0);
    const token = this.lexer.next();
    if (token.kind === "end") return node;
    if (token.kind === ")") throw new QueryError("where", "unmatched ')'", token.position);
    throw this.unexpected(token, "expected '~and', '~or' or the end of the filter");
  }

  private expression(depth: number): WhereNode {
    const operands = [this.conjunction(depth)];
    while (this.lexer.peek().kind === "~or") {
      this.lexer.next();
      operands.push(this.conjunction(depth));
    }
    return operands.length === 1 ? operands[0]! : { kind: "or", operands };
  }

  private conjunction(depth: number): WhereNode {
    const operands = [this.term(depth)];
    while (this.lexer.peek().kind === "~and") {
      this.lexer.next();
      operands.push(this.term(depth));
    }
    return operands.length === 1 ? operands[0]! : { kind: "and", operands };
  }

  private term(depth: number): WhereNode {
    const token = this.lexer.next();
    if (token.kind === "~not" || token.kind === "(") {
      if (depth + 1 > WHERE_MAX_DEPTH) {
        throw new QueryError(
          "where",
          `nested deeper than ${WHERE_MAX_DEPTH} levels`,
          token.position,
        );
      }
    }
    if (token.kind === "~not") {
      return { kind: "not", operand: this.term(depth + 1), position: token.position };
    }
    if (token.kind !== "(") throw this.unexpected(token, "expected '(' or '~not'");
    const next = this.lexer.peekChar();
    if (next === "(" || next === "~") {
      const inner = this.expression(depth + 1);
      const close = this.lexer.next();
      if (close.kind !== ")") throw this.unexpected(close, "expected ')'");
      return inner;
    }
    return this.condition(token.position);
  }

  private condition(position: number): ConditionNode {
    this.conditions++;
    if (this.conditions > WHERE_MAX_CONDITIONS) {
      throw new QueryError("where", `more than ${WHERE_MAX_CONDITIONS} conditions`, position);
    }
    const ref = this.lexer.readReference();
    if (ref.text === "") throw new QueryError("where", "expected a field reference", ref.position);
    this.expect(",", "expected ',' after the field reference");
    const op = this.lexer.readOperator();
    if (op.text === "") throw new QueryError("where", "expected an operator", op.position);
    const operator = op.text.toLowerCase();
    if (!isOperator(operator)) {
      throw new QueryError("where", `unknown operator ${quoteForMessage(op.text)}`, op.position);
    }
    const after = this.lexer.next();
    if (after.kind !== ")" && after.kind !== ",") {
      throw this.unexpected(after, "expected ',' or ')' after the operator");
    }
    let value: ConditionValue;
    if (after.kind === ")") {
      if (!VALUELESS_OPERATORS.has(operator)) {
        throw new QueryError("where", `operator '${operator}' needs a value`, after.position);
      }
      value = { kind: "none" };
    } else if (VALUELESS_OPERATORS.has(operator)) {
      throw new QueryError("where", `operator '${operator}' takes no value`, this.lexer.position());
    } else if (LIST_OPERATORS.has(operator)) {
      value = { kind: "list", items: this.list() };
      if (operator === "btw" && value.items.length !== 2) {
        const at = value.items[0]!.position;
        throw new QueryError("where", "operator 'btw' needs exactly two values", at);
      }
    } else {
      value = { kind: "single", value: this.nonEmpty(this.lexer.readValue()) };
      this.expect(")", "expected ')' after the value");
    }
    return { kind: "condition", ref, operator, operatorPosition: op.position, value, position };
  }

  /** Comma-separated items up to and including the closing ")". */
  private list(): Literal[] {
    const items: Literal[] = [];
    for (;;) {
      items.push(this.nonEmpty(this.lexer.readItem()));
      const token = this.lexer.next();
      if (token.kind === ")") return items;
      if (token.kind !== ",") throw this.unexpected(token, "expected ',' or ')' after the value");
    }
  }

  private nonEmpty(literal: Literal): Literal {
    if (literal.text === "") {
      throw new QueryError("where", "empty value (use blank or notblank)", literal.position);
    }
    return literal;
  }

  private expect(kind: "," | ")", message: string): void {
    const token = this.lexer.next();
    if (token.kind !== kind) throw this.unexpected(token, message);
  }

  private unexpected(token: StructureToken, expected: string): QueryError {
    if (token.kind === "end") {
      return new QueryError("where", `unexpected end of filter, ${expected}`, token.position);
    }
    if (token.kind === "unexpected" && token.text.startsWith("~")) {
      return new QueryError(
        "where",
        `unknown connective ${quoteForMessage(token.text)}, ${expected}`,
        token.position,
      );
    }
    const text = token.kind === "unexpected" ? token.text : token.kind;
    return new QueryError(
      "where",
      `unexpected ${quoteForMessage(text)}, ${expected}`,
      token.position,
    );
  }
}
