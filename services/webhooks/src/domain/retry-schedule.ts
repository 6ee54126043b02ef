/**
 * WEBHOOK_RETRY_SCHEDULE: the pauses, in seconds, between the attempts of one delivery. N
 * numbers give N retries after the first attempt; each pause is drawn within ±25 % of its
 * number, so that deliveries failed together do not all come back at once.
 */
export const DEFAULT_RETRY_SCHEDULE = "5,30,120,600,1800,3600,10800,21600,43200";

/** The pauses of a schedule's text; throws naming what does not parse. */
export function parseRetrySchedule(text: string): number[] {
  if (text.trim() === "") return [];
  return text.split(",").map((item) => {
    const value = item.trim();
    if (!/^[0-9]{1,7}$/.test(value)) {
      throw new Error(`WEBHOOK_RETRY_SCHEDULE: ${JSON.stringify(value)} is not whole seconds`);
    }
    return Number(value);
  });
}

/**
 * The pause before the attempt after `attempts` attempts, in milliseconds, or undefined when the
 * schedule has no more (the delivery has failed). `random` is in [0, 1).
 */
export function retryDelayMs(
  schedule: readonly number[],
  attempts: number,
  random: number = Math.random(),
): number | undefined {
  const seconds = schedule[attempts - 1];
  if (attempts < 1 || seconds === undefined) return undefined;
  return Math.round(seconds * 1000 * (0.75 + 0.5 * random));
}
