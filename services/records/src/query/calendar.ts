/**
 * Dates as whole UTC days since 1970-01-01 ("epoch days") and instants as epoch milliseconds,
 * limited like stored values (by the field-type registry) to the years 1-9999.
 */
export const DAY_MS = 86_400_000;

export function epochDay(year: number, month: number, day: number): number {
  const date = new Date(0);
  // setUTCFullYear, not Date.UTC: Date.UTC maps the years 0-99 to 1900-1999.
  date.setUTCFullYear(year, month - 1, day);
  return Math.round(date.getTime() / DAY_MS);
}

export const FIRST_DAY = epochDay(1, 1, 1);
export const LAST_DAY = epochDay(9999, 12, 31);

export function isSupportedDay(day: number): boolean {
  return Number.isInteger(day) && day >= FIRST_DAY && day <= LAST_DAY;
}

const pad = (n: number, width: number) => String(n).padStart(width, "0");

/** `YYYY-MM-DD`, the stored form of a date. */
export function formatDay(day: number): string {
  const date = new Date(day * DAY_MS);
  return `${pad(date.getUTCFullYear(), 4)}-${pad(date.getUTCMonth() + 1, 2)}-${pad(date.getUTCDate(), 2)}`;
}

/**
 * `YYYY-MM-DDTHH:MM:SS.mmmZ`, which PostgreSQL reads as timestamptz. Unlike `toISOString` it
 * writes the year 10000 (the exclusive end of 9999-12-31) without the `+01` prefix.
 */
export function formatInstant(ms: number): string {
  const date = new Date(ms);
  const time = `${pad(date.getUTCHours(), 2)}:${pad(date.getUTCMinutes(), 2)}:${pad(date.getUTCSeconds(), 2)}`;
  return `${formatDay(Math.floor(ms / DAY_MS))}T${time}.${pad(date.getUTCMilliseconds(), 3)}Z`;
}

/** The epoch day `now` falls on, in UTC. */
export function dayOf(now: Date): number {
  return Math.floor(now.getTime() / DAY_MS);
}
