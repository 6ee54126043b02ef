/** The audit log keeps 90 days: long enough to answer "who changed this" within a quarter. */
export const AUDIT_RETENTION_DAYS = 90;

const DAY_MS = 24 * 3600 * 1000;

/** The oldest instant still kept at `now`: events before it are expired. */
export function retentionCutoff(now: Date): Date {
  return new Date(now.getTime() - AUDIT_RETENTION_DAYS * DAY_MS);
}

/** The first instant of the UTC month of `at`. */
export function monthStart(at: Date): Date {
  return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1));
}

/** The first instant of the UTC month after the one of `at`. */
export function nextMonthStart(at: Date): Date {
  return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1));
}

const PARTITION = /^audit_event_p(\d{4})(\d{2})$/;

/** The name of the monthly partition that holds `at`: `audit_event_p202611`. */
export function partitionName(at: Date): string {
  const month = String(at.getUTCMonth() + 1).padStart(2, "0");
  return `audit_event_p${at.getUTCFullYear()}${month}`;
}

/** The month a partition name stands for, or undefined for another table (the default one). */
export function partitionMonth(name: string): Date | undefined {
  const match = PARTITION.exec(name);
  if (!match) return undefined;
  return new Date(Date.UTC(Number(match[1]), Number(match[2]) - 1, 1));
}

/**
 * The monthly partitions to drop at `now`: those whose whole month lies before the cutoff. The
 * partition that straddles the cutoff stays; its old rows are deleted one by one.
 */
export function expiredPartitions(names: string[], now: Date): string[] {
  const cutoff = retentionCutoff(now).getTime();
  return names.filter((name) => {
    const month = partitionMonth(name);
    return month !== undefined && nextMonthStart(month).getTime() <= cutoff;
  });
}

/** A partition bound as a timestamptz literal in UTC, whatever the session's time zone. */
export function utcLiteral(at: Date): string {
  return `${at.toISOString().slice(0, 10)} 00:00:00+00`;
}
