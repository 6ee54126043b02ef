/**
 * Bounds of list and batch requests, which the gateway checks or documents and the service
 * behind it checks again, so that a caller that reaches the service directly gets no further.
 */

/** Records per list page: 50 unless asked, at most 1000. */
export const RECORD_LIMIT_DEFAULT = 50;
export const RECORD_LIMIT_MAX = 1000;
/** The records one batch create, update or delete takes, all or none. */
export const RECORD_BATCH_MAX = 1000;
/**
 * The furthest `offset` of a record list: an int32 in ListRecordsRequest, and past any plan's
 * table.
 */
export const RECORD_OFFSET_MAX = 10_000_000;
/** The longest `where`, in characters (code points): a filter is a query, not a payload. */
export const WHERE_MAX_LENGTH = 4096;
/** How deep `where` may nest groups and negations. */
export const WHERE_MAX_DEPTH = 10;
/** The most conditions one `where` may hold. */
export const WHERE_MAX_CONDITIONS = 50;
/** The operators of a `where` condition. */
export const WHERE_OPERATORS = [
  "eq",
  "neq",
  "gt",
  "gte",
  "lt",
  "lte",
  "like",
  "nlike",
  "in",
  "nin",
  "btw",
  "blank",
  "notblank",
  "checked",
  "notchecked",
  "anyof",
  "allof",
  "nanyof",
  "has",
  "hasnot",
] as const;
/** The longest `sort` or `fields` text, in characters: room for hundreds of field names. */
export const REFERENCE_LIST_MAX_LENGTH = 16_384;

/**
 * The most bytes of values one record may store: the JSON text of its `data` as the write
 * statements send it. Every read builds its records whole in the records service's and the
 * gateway's memory, so a record must stay far below what a long text in each of hundreds of
 * fields would otherwise allow.
 */
export const RECORD_MAX_BYTES = 2 * 1024 * 1024;
/**
 * The most bytes of values one list page sends, as PostgreSQL sends them (`data` as text, which
 * puts a space after each `:` and `,` and writes numbers out in full): a page must fit the
 * services' memory (256-512 MiB a pod) several times over, with other calls running. About
 * eight records at RECORD_MAX_BYTES fit.
 */
export const PAGE_MAX_BYTES = 16 * 1024 * 1024;

/** A bound in bytes as the documents and messages say it. */
export const mebibytes = (bytes: number) => `${bytes / (1024 * 1024)} MiB`;

/** Audit events per page: 50 unless asked, at most 1000. */
export const AUDIT_LIMIT_DEFAULT = 50;
export const AUDIT_LIMIT_MAX = 1000;
