import { dayOf } from "./calendar.js";

const NAMED: ReadonlyMap<string, number> = new Map([
  ["today", 0],
  ["yesterday", -1],
  ["tomorrow", 1],
]);
const COUNTED = /^(daysago|daysfromnow):([0-9]{1,7})$/;

/**
 * The epoch day a relative date names (`today`, `yesterday`, `tomorrow`,
 * `daysAgo:N`, `daysFromNow:N`, in UTC, keywords in any case), or undefined when the text is not
 * one. `now` is a parameter so that one request sees one "today" and tests can fix it. The
 * caller checks that the day lies in the supported years.
 */
export function relativeDay(text: string, now: Date): number | undefined {
  const lower = text.toLowerCase();
  const offset = NAMED.get(lower);
  if (offset !== undefined) return dayOf(now) + offset;
  const match = COUNTED.exec(lower);
  if (!match) return undefined;
  const days = Number(match[2]);
  return dayOf(now) + (match[1] === "daysago" ? -days : days);
}
