/**
 * The query language of the records service (docs/query-language.md): `where`, `sort` and `fields`
 * parsed into trees and compiled to parameterised PostgreSQL over
 * `records.record(row_id, data, created_at, updated_at)`. Pure functions, no I/O; every client
 * mistake is a QueryError with the parameter and a 1-based position.
 */
export {
  type FieldRelation,
  type LinkPath,
  type QueryField,
  type QueryFieldType,
  type ReferenceTarget,
  type RollupFunctionName,
  resolveReference,
  SYSTEM_COLUMNS,
  type SystemColumn,
} from "./field-reference.js";
export { parseFields } from "./fields-parser.js";
export {
  QueryError,
  type QueryParameter,
  type QueryValidationIssue,
} from "./query-error.js";
export {
  isSortable,
  type OrderTerm,
  orderBySql,
  orderTerms,
  parseSort,
  SORT_MAX_KEYS,
  type SortKey,
} from "./sort.js";
export type { Storage } from "./value-expression.js";
export type {
  AndNode,
  ConditionNode,
  ConditionValue,
  Literal,
  NotNode,
  Operator,
  OrNode,
  WhereNode,
} from "./where-ast.js";
export {
  OPERATORS,
  WHERE_MAX_CONDITIONS,
  WHERE_MAX_DEPTH,
} from "./where-ast.js";
export {
  buildWhere,
  type CompiledWhere,
  type CompileOptions,
  compileWhere,
  type SqlFragment,
} from "./where-compiler.js";
export { parseWhere } from "./where-parser.js";
export { printWhere } from "./where-printer.js";
