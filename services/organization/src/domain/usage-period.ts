import type { ValidationItem } from "@rowbase/kit";

/** A period of whole UTC days, both ends inclusive, as YYYY-MM-DD. */
export interface UsagePeriod {
  from: string;
  to: string;
  /** Every day of the period, oldest first. */
  days: string[];
}

/** The longest period api_stats answers in one call (a year, leap day included). */
export const MAX_PERIOD_DAYS = 366;

const DAY_MS = 24 * 3600 * 1000;
const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;

/** The UTC day of an instant, YYYY-MM-DD. */
export function utcDay(at: Date): string {
  return at.toISOString().slice(0, 10);
}

/** The first day of the UTC month of a day, YYYY-MM-01. */
export function firstOfMonth(day: string): string {
  return `${day.slice(0, 7)}-01`;
}

/**
 * Midnight UTC of a YYYY-MM-DD day that exists in the calendar, in the years 1 to 9999 (all
 * PostgreSQL's dates and the gateway's format share; PostgreSQL has no year 0), else undefined.
 */
function parseDay(text: string): number | undefined {
  const match = DATE.exec(text);
  if (!match) return undefined;
  const [year, month, day] = [Number(match[1]), Number(match[2]), Number(match[3])];
  // Not Date.UTC, which reads the years 0 to 99 as 1900 to 1999.
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  return year >= 1 && utcDay(date) === text ? date.getTime() : undefined;
}

/**
 * The period of an api_stats request: `to` defaults to today and `from` to the
 * first of this month, whether or not `to` is given, so a `to` before this month needs a `from`.
 * Either the period or what is wrong with the parameters (REST names `from` and `to`).
 */
export function usagePeriodOf(
  fromText: string,
  toText: string,
  now: Date,
): UsagePeriod | { problems: ValidationItem[] } {
  const problems: ValidationItem[] = [];
  const mustBeDate = "must be a date YYYY-MM-DD";
  const to = toText === "" ? utcDay(now) : toText;
  const from = fromText === "" ? firstOfMonth(utcDay(now)) : fromText;
  const toAt = parseDay(to);
  const fromAt = parseDay(from);
  if (fromText !== "" && fromAt === undefined)
    problems.push({ key: "from", message: mustBeDate, source: "query", code: "invalid_value" });
  if (toText !== "" && toAt === undefined)
    problems.push({ key: "to", message: mustBeDate, source: "query", code: "invalid_value" });
  if (problems.length > 0 || fromAt === undefined || toAt === undefined) return { problems };
  if (fromAt > toAt) {
    // Name what the client sent: a left-out `from` is this month's first day.
    const problem: ValidationItem =
      fromText === ""
        ? {
            key: "to",
            message: "must not be before from (default: the first of this month)",
            source: "query",
            code: "out_of_range",
          }
        : { key: "from", message: "must not be after to", source: "query", code: "out_of_range" };
    return { problems: [problem] };
  }
  const count = (toAt - fromAt) / DAY_MS + 1;
  if (count > MAX_PERIOD_DAYS) {
    return {
      problems: [
        {
          key: "from",
          message: `period must be at most ${MAX_PERIOD_DAYS} days`,
          source: "query",
          code: "out_of_range",
        },
      ],
    };
  }
  const days = Array.from({ length: count }, (_, i) => utcDay(new Date(fromAt + i * DAY_MS)));
  return { from, to, days };
}
