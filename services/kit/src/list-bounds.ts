/**
 * Bounds of list and batch requests, which the gateway checks (and documents) and the service
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
/** The longest `sort` or `fields` text, in characters: room for hundreds of field names. */
export const REFERENCE_LIST_MAX_LENGTH = 16_384;

/** Audit events per page: 50 unless asked, at most 1000. */
export const AUDIT_LIMIT_DEFAULT = 50;
export const AUDIT_LIMIT_MAX = 1000;
