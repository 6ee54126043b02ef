/** The list parameter a problem was found in. */
export type QueryParameter = "where" | "sort" | "fields";

/** One item of the 400 validation envelope's `extra`. */
export interface QueryValidationIssue {
  key: QueryParameter;
  message: string;
  source: "query";
  /** A field the text names that the table does not have, or text that does not parse. */
  code: "not_found" | "invalid_syntax";
}

/**
 * The one error of the query language: a `where`, `sort` or `fields` parameter the service
 * must refuse with 400. Anything else thrown from this module is a bug (a 500), never the
 * client's fault.
 *
 * `position` is the 1-based character position in the parameter (characters are Unicode code
 * points, so an emoji counts once), as in `unknown operator 'eqq' at 9`; the message
 * carries it too, so `message` alone is what the client reads.
 */
export class QueryError extends Error {
  override readonly name = "QueryError";
  readonly key: QueryParameter;
  /** The message without the ` at N` suffix. */
  readonly reason: string;
  readonly position: number | undefined;
  /** `not_found` for a field the table does not have; `invalid_syntax` otherwise. */
  readonly code: QueryValidationIssue["code"];

  constructor(
    key: QueryParameter,
    reason: string,
    position?: number,
    code: QueryValidationIssue["code"] = "invalid_syntax",
  ) {
    super(position === undefined ? reason : `${reason} at ${position}`);
    this.key = key;
    this.reason = reason;
    this.position = position;
    this.code = code;
  }

  toValidationIssue(): QueryValidationIssue {
    return { key: this.key, message: this.message, source: "query", code: this.code };
  }
}

const QUOTED_MAX = 60;

/** Client text as it appears inside an error message: quoted and cut to a readable length. */
export function quoteForMessage(text: string): string {
  const chars = Array.from(text);
  const shown = chars.length > QUOTED_MAX ? `${chars.slice(0, QUOTED_MAX).join("")}...` : text;
  return `'${shown}'`;
}
