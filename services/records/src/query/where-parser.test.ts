import { describe, expect, it } from "vitest";
import { QueryError } from "./query-error.js";
import { LIST_OPERATORS, OPERATORS, VALUELESS_OPERATORS, type WhereNode } from "./where-ast.js";
import { parseWhere } from "./where-parser.js";

/** The tree in a compact form: conditions as their text, no positions. */
function shape(node: WhereNode): unknown {
  switch (node.kind) {
    case "condition": {
      const value =
        node.value.kind === "none"
          ? []
          : node.value.kind === "single"
            ? [node.value.value.text]
            : node.value.items.map((item) => item.text);
      return [node.ref.text, node.operator, ...value].join("|");
    }
    case "not":
      return { not: shape(node.operand) };
    case "and":
      return { and: node.operands.map(shape) };
    case "or":
      return { or: node.operands.map(shape) };
  }
}

function parseError(text: string): QueryError {
  try {
    parseWhere(text);
  } catch (error) {
    if (error instanceof QueryError) return error;
    throw error;
  }
  throw new Error(`${JSON.stringify(text)} parsed`);
}

describe("parseWhere", () => {
  it("parses the documented example with its positions", () => {
    const tree = parseWhere("(Status,eq,Active)~and((Age,gte,18)~or(Vip,checked))");
    expect(tree).toEqual({
      kind: "and",
      operands: [
        {
          kind: "condition",
          ref: { text: "Status", position: 2 },
          operator: "eq",
          operatorPosition: 9,
          value: { kind: "single", value: { text: "Active", position: 12 } },
          position: 1,
        },
        {
          kind: "or",
          operands: [
            {
              kind: "condition",
              ref: { text: "Age", position: 25 },
              operator: "gte",
              operatorPosition: 29,
              value: { kind: "single", value: { text: "18", position: 33 } },
              position: 24,
            },
            {
              kind: "condition",
              ref: { text: "Vip", position: 40 },
              operator: "checked",
              operatorPosition: 44,
              value: { kind: "none" },
              position: 39,
            },
          ],
        },
      ],
    });
  });

  it.each(OPERATORS)("parses the operator %s", (operator) => {
    const value = VALUELESS_OPERATORS.has(operator)
      ? ""
      : LIST_OPERATORS.has(operator)
        ? ",1,2"
        : ",1";
    expect(shape(parseWhere(`(F,${operator}${value})`))).toBe(
      ["F", operator, ...value.split(",").slice(1)].join("|"),
    );
  });

  it("reads operators and connectives regardless of case", () => {
    expect(shape(parseWhere("(A,EQ,1)~AND~Not(B,Blank)~oR(C,Gt,2)"))).toEqual({
      or: [{ and: ["A|eq|1", { not: "B|blank" }] }, "C|gt|2"],
    });
  });

  describe("values and quoting", () => {
    it.each([
      ["(Name,eq,Smith, John)", "Name|eq|Smith, John"],
      ["(Name,eq,a(b)", "Name|eq|a(b"],
      ['(Name,eq,say "hi")', 'Name|eq|say "hi"'],
      ['(Name,eq,"a)b")', "Name|eq|a)b"],
      ['(Name,eq,"say ""hi""")', 'Name|eq|say "hi"'],
      ['(Name,eq,"""")', 'Name|eq|"'],
      ['(Name,eq,"  spaced  ")', "Name|eq|  spaced  "],
      ["( Name , eq ,  spaced out  )", "Name|eq|spaced out"],
      ["(\tName,\neq,\r\nx\t)", "Name|eq|x"],
      ['("Size (cm), net",gt,3)', "Size (cm), net|gt|3"],
      ['("a""b",eq,1)', 'a"b|eq|1'],
      ['("12",eq,1)', "12|eq|1"],
      ["(Full name,eq,Ada Lovelace)", "Full name|eq|Ada Lovelace"],
      ["(a~b,eq,1)", "a~b|eq|1"],
      ["(Name,eq,~and)", "Name|eq|~and"],
      ["(Name,eq,a,b)", "Name|eq|a,b"],
      ["(Name,eq,😀 ünïcødé)", "Name|eq|😀 ünïcødé"],
      ["(Name,eq,'; drop table record; --)", "Name|eq|'; drop table record; --"],
    ])("%s", (text, expected) => {
      expect(shape(parseWhere(text))).toBe(expected);
    });

    it.each([
      ['(Tags,anyof,"a,b",c)', "Tags|anyof|a,b|c"],
      ['(Tags,in, "x" , y ,"z)")', "Tags|in|x|y|z)"],
      ['(Tags,allof,"""q""",r)', 'Tags|allof|"q"|r'],
      ["(Age,btw,1, 2)", "Age|btw|1|2"],
      ["(Tags,nanyof,a)", "Tags|nanyof|a"],
    ])("list %s", (text, expected) => {
      expect(shape(parseWhere(text))).toBe(expected);
    });

    it("records the position of each list item", () => {
      const tree = parseWhere('(T,in,a,"b",c)');
      expect(tree.kind === "condition" && tree.value).toEqual({
        kind: "list",
        items: [
          { text: "a", position: 7 },
          { text: "b", position: 9 },
          { text: "c", position: 13 },
        ],
      });
    });
  });

  describe("precedence", () => {
    it.each([
      ["(a,blank)~or(b,blank)~and(c,blank)", { or: ["a|blank", { and: ["b|blank", "c|blank"] }] }],
      ["(a,blank)~and(b,blank)~or(c,blank)", { or: [{ and: ["a|blank", "b|blank"] }, "c|blank"] }],
      ["(a,blank)~or(b,blank)~or(c,blank)", { or: ["a|blank", "b|blank", "c|blank"] }],
      ["(a,blank)~and(b,blank)~and(c,blank)", { and: ["a|blank", "b|blank", "c|blank"] }],
      ["~not(a,blank)~and(b,blank)", { and: [{ not: "a|blank" }, "b|blank"] }],
      ["~not((a,blank)~and(b,blank))", { not: { and: ["a|blank", "b|blank"] } }],
      ["~not~not(a,blank)", { not: { not: "a|blank" } }],
      [
        "((a,blank)~or(b,blank))~and(c,blank)",
        { and: [{ or: ["a|blank", "b|blank"] }, "c|blank"] },
      ],
      [
        "((a,blank)~and(b,blank))~and(c,blank)",
        { and: [{ and: ["a|blank", "b|blank"] }, "c|blank"] },
      ],
      ["((a,blank))", "a|blank"],
      ["(~not(a,blank))", { not: "a|blank" }],
      [" ( ( a , blank ) ) ", "a|blank"],
      [
        "(a,blank) ~and ( (b,blank) ~or ~not (c,blank) )",
        { and: ["a|blank", { or: ["b|blank", { not: "c|blank" }] }] },
      ],
    ])("%s", (text, expected) => {
      expect(shape(parseWhere(text))).toEqual(expected);
    });
  });

  describe("errors carry 1-based positions", () => {
    it.each([
      ["(Status,eqq,Active)", "unknown operator 'eqq' at 9"],
      ["(Status,eq,Active", "unexpected end of filter, expected ')' after the value at 18"],
      ["(Status)", "unexpected ')', expected ',' after the field reference at 8"],
      ['("Status"x,eq,1)', "unexpected 'x', expected ',' after the field reference at 10"],
      ["(,eq,1)", "expected a field reference at 2"],
      ["(  ,eq,1)", "expected a field reference at 4"],
      ["()", "expected a field reference at 2"],
      ["(A,,1)", "expected an operator at 4"],
      ["(A,eq)", "operator 'eq' needs a value at 6"],
      ["(A,in)", "operator 'in' needs a value at 6"],
      ["(A,blank,1)", "operator 'blank' takes no value at 10"],
      ["(A,checked,)", "operator 'checked' takes no value at 12"],
      ["(A,btw,1)", "operator 'btw' needs exactly two values at 8"],
      ["(A,btw,1,2,3)", "operator 'btw' needs exactly two values at 8"],
      ['(A,eq,"x"y)', "unexpected 'y', expected ')' after the value at 10"],
      ['(A,in,"x"y)', "unexpected 'y', expected ',' or ')' after the value at 10"],
      ['(A,eq,"x', "unterminated quoted text at 7"],
      ['("A,eq,x)', "unterminated quoted text at 2"],
      ["(A,eq,1)~and", "unexpected end of filter, expected '(' or '~not' at 13"],
      ["(A,eq,1)~and~", "unknown connective '~', expected '(' or '~not' at 13"],
      [
        "(A,eq,1)~xor(B,eq,2)",
        "unknown connective '~xor', expected '~and', '~or' or the end of the filter at 9",
      ],
      ["~nope(A,eq,1)", "unknown connective '~nope', expected '(' or '~not' at 1"],
      ["(A,eq,1))", "unmatched ')' at 9"],
      ["(A,eq,1)(B,eq,2)", "unexpected '(', expected '~and', '~or' or the end of the filter at 9"],
      ["(A,eq,1) junk", "unexpected 'junk', expected '~and', '~or' or the end of the filter at 10"],
      ["((A,eq,1)", "unexpected end of filter, expected ')' at 10"],
      ["((A,eq,1)~and(B,eq,2)x", "unexpected 'x', expected ')' at 22"],
      ["A,eq,1", "unexpected 'A', expected '(' or '~not' at 1"],
      ["(A,eq,)", "empty value (use blank or notblank) at 7"],
      ['(A,eq,"")', "empty value (use blank or notblank) at 7"],
      ["(A,in,1,,2)", "empty value (use blank or notblank) at 9"],
      ["(A,in,1,)", "empty value (use blank or notblank) at 9"],
      ["(A,eq 1)", "unknown operator 'eq 1' at 4"],
      ["(A,eq,1", "unexpected end of filter, expected ')' after the value at 8"],
      ["(A", "unexpected end of filter, expected ',' after the field reference at 3"],
      ["(", "expected a field reference at 2"],
      ["~not", "unexpected end of filter, expected '(' or '~not' at 5"],
      [")", "unexpected ')', expected '(' or '~not' at 1"],
      ["(😀,eqq,1)", "unknown operator 'eqq' at 4"],
      [
        "(😀😀,eq,1)~and(B,eq,2)x",
        "unexpected 'x', expected '~and', '~or' or the end of the filter at 22",
      ],
      ["(A,eq,a\u0000b)", "NUL character at 8"],
      ["(A,eq,a\ud800b)", "invalid Unicode character at 8"],
      ["", "must not be empty"],
      [" \t\n", "must not be empty"],
    ])("%j", (text, message) => {
      const error = parseError(text);
      expect(error.message).toBe(message);
      expect(error.key).toBe("where");
      const position = /at (\d+)$/.exec(message)?.[1];
      expect(error.position).toBe(position === undefined ? undefined : Number(position));
    });

    it("quotes long client text in messages only in part", () => {
      const error = parseError(`(A,${"x".repeat(200)},1)`);
      expect(error.message).toBe(`unknown operator '${"x".repeat(60)}...' at 4`);
    });
  });

  describe("limits", () => {
    const condition = "(A,eq,1)";

    it("allows 10 levels of nesting and refuses 11", () => {
      const nested = (groups: number) => `${"(".repeat(groups)}${condition}${")".repeat(groups)}`;
      expect(shape(parseWhere(nested(9)))).toBe("A|eq|1");
      expect(parseError(nested(10)).message).toBe("nested deeper than 10 levels at 11");
    });

    it("counts ~not as a level", () => {
      expect(shape(parseWhere(`${"~not".repeat(9)}${condition}`))).toBeTruthy();
      expect(parseError(`${"~not".repeat(10)}${condition}`).message).toBe(
        "nested deeper than 10 levels at 41",
      );
      expect(parseError(`~not(${"~not".repeat(8)}${condition})`).message).toBe(
        "nested deeper than 10 levels at 38",
      );
    });

    it("stops deep input at the limit instead of overflowing the stack", () => {
      expect(parseError("(".repeat(4000)).message).toBe("nested deeper than 10 levels at 11");
      expect(parseError("~not".repeat(1000)).message).toBe("nested deeper than 10 levels at 41");
    });

    it("allows 50 conditions and refuses 51", () => {
      const conditions = (n: number) => Array.from({ length: n }, () => condition).join("~or");
      expect(parseWhere(conditions(50))).toMatchObject({ kind: "or" });
      expect(parseError(conditions(51)).message).toBe(`more than 50 conditions at ${50 * 11 + 1}`);
    });

    it("allows 4096 characters and refuses 4097", () => {
      const padded = (length: number) => `${condition}${" ".repeat(length - condition.length)}`;
      expect(shape(parseWhere(padded(4096)))).toBe("A|eq|1");
      const error = parseError(padded(4097));
      expect(error.message).toBe("must be at most 4096 characters");
      expect(error.position).toBeUndefined();
    });

    it("counts characters, not UTF-16 units", () => {
      const value = "😀".repeat(4096 - "(A,eq,)".length);
      expect(shape(parseWhere(`(A,eq,${value})`))).toBe(`A|eq|${value}`);
      expect(parseError(`(A,eq,${value}😀)`).message).toBe("must be at most 4096 characters");
      expect(parseError("😀".repeat(10_000)).message).toBe("must be at most 4096 characters");
    });
  });
});
