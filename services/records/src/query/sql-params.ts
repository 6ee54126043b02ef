/** The PostgreSQL types a parameter is cast to; every placeholder carries its cast. */
export type ParamType =
  | "text"
  | "boolean"
  | "numeric"
  | "bigint"
  | "date"
  | "timestamptz"
  | "tstzrange"
  | "jsonb"
  | "jsonpath"
  | "text[]"
  | "numeric[]"
  | "bigint[]"
  | "date[]"
  | "tstzrange[]"
  | "jsonb[]";

/**
 * Collects the parameters of one statement fragment. Placeholders continue after `offset`
 * parameters the caller already uses (`table_id = $1` makes the first one here `$2`).
 */
export class SqlParams {
  readonly values: unknown[] = [];

  constructor(private readonly offset: number) {
    if (!Number.isSafeInteger(offset) || offset < 0) {
      throw new Error(`parameter offset must be a whole number >= 0, got ${offset}`);
    }
  }

  /** The placeholder of a new parameter, cast to `type`, e.g. `$3::numeric`. */
  add(value: unknown, type: ParamType): string {
    this.values.push(value);
    return `$${this.offset + this.values.length}::${type}`;
  }
}
