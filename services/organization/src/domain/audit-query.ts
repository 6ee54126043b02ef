import {
  AUDIT_ACTION_FILTER,
  AUDIT_LIMIT_DEFAULT,
  AUDIT_LIMIT_MAX,
  type ValidationItem,
} from "@rowbase/kit";

/** A validated page of the audit log: bounds on `at` (since inclusive, until exclusive). */
export interface AuditQuery {
  limit: number;
  offset: number;
  since?: Date | undefined;
  until?: Date | undefined;
  action?: string | undefined;
}

/** The instants a bound may be: 0001-01-01 to 9999-12-31, all RFC 3339 (and PostgreSQL) can write. */
const EARLIEST_MS = -62_135_596_800_000;
const LATEST_MS = 253_402_300_799_999;

/**
 * The instant of a protobuf Timestamp, to the millisecond: truncated, since rounding the last
 * nanoseconds of year 9999 up would make an instant of year 10000.
 */
export function instantOf(timestamp: { seconds: bigint; nanos: number }): Date {
  return new Date(Number(timestamp.seconds) * 1000 + Math.floor(timestamp.nanos / 1_000_000));
}

function outOfRange(date: Date | undefined): boolean {
  if (date === undefined) return false;
  const ms = date.getTime();
  return !(ms >= EARLIEST_MS && ms <= LATEST_MS);
}

/**
 * The parameters of an audit list (`GET /audit/list`), or what is wrong with them. A limit of
 * 0 is the unset proto field: the default 50.
 */
export function auditQueryOf(input: {
  limit: number;
  offset: number;
  since?: Date | undefined;
  until?: Date | undefined;
  action: string;
}): AuditQuery | { problems: ValidationItem[] } {
  const problems: ValidationItem[] = [];
  const limit = input.limit === 0 ? AUDIT_LIMIT_DEFAULT : input.limit;
  if (!Number.isInteger(limit) || limit < 1 || limit > AUDIT_LIMIT_MAX) {
    problems.push({
      key: "limit",
      message: `must be 1-${AUDIT_LIMIT_MAX}`,
      source: "query",
      code: "out_of_range",
    });
  }
  if (!Number.isInteger(input.offset) || input.offset < 0) {
    problems.push({
      key: "offset",
      message: "must be 0 or more",
      source: "query",
      code: "out_of_range",
    });
  }
  if (!AUDIT_ACTION_FILTER.test(input.action)) {
    problems.push({
      key: "action",
      message: "must be an action such as record.updated",
      source: "query",
      code: "invalid_value",
    });
  }
  for (const key of ["since", "until"] as const) {
    if (outOfRange(input[key])) {
      problems.push({
        key,
        message: "must be a time in the years 1 to 9999",
        source: "query",
        code: "out_of_range",
      });
    }
  }
  if (input.since && input.until && input.until.getTime() <= input.since.getTime()) {
    problems.push({
      key: "until",
      message: "must be after since",
      source: "query",
      code: "out_of_range",
    });
  }
  if (problems.length > 0) return { problems };
  return {
    limit,
    offset: input.offset,
    since: input.since,
    until: input.until,
    action: input.action === "" ? undefined : input.action,
  };
}

const HOUR_MS = 3_600_000;

/** A time range, from inclusive to exclusive; no `to`: open. */
export interface TimeRange {
  from: Date;
  to?: Date | undefined;
}

/**
 * How a list's total over `[since, until)` is counted: the UTC hours the range covers whole
 * (`whole`, absent when none fits) from the kept counts (`audit_count`), and the events of
 * `partial`, the parts before the first whole hour and after the last, one by one.
 */
export function totalParts(
  since: Date,
  until: Date | undefined,
): { whole?: TimeRange; partial: TimeRange[] } {
  const first = Math.ceil(since.getTime() / HOUR_MS) * HOUR_MS;
  const end = until === undefined ? Infinity : Math.floor(until.getTime() / HOUR_MS) * HOUR_MS;
  // No hour fits, or the first would begin in year 10000 (out of PostgreSQL's range).
  if (first >= end || first > LATEST_MS) return { partial: [{ from: since, to: until }] };
  const partial: TimeRange[] = [];
  if (first > since.getTime()) partial.push({ from: since, to: new Date(first) });
  if (until !== undefined && end < until.getTime())
    partial.push({ from: new Date(end), to: until });
  return { whole: { from: new Date(first), to: until && new Date(end) }, partial };
}
