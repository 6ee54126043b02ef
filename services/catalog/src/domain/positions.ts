/**
 * Where a field lands when moved to `requested` in a table of `count` fields: a position past
 * the end means last.
 */
export function targetPosition(requested: number, count: number): number {
  return Math.max(0, Math.min(requested, count - 1));
}

/**
 * How the other fields shift when one moves from `from` to `to`: the positions in
 * [`low`, `high`] move by `by`. Undefined when nothing moves.
 */
export function shiftFor(
  from: number,
  to: number,
): { low: number; high: number; by: 1 | -1 } | undefined {
  if (to === from) return undefined;
  return to < from ? { low: to, high: from - 1, by: 1 } : { low: from + 1, high: to, by: -1 };
}
