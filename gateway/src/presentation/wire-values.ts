import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { timeOf } from "@rowbase/kit";

/**
 * How protobuf values are written in REST responses: int64 ids as JSON numbers (ids stay below
 * 2^53), times as RFC 3339 UTC with milliseconds. Kit writes them, for webhooks' deliveries too.
 */
export { idOf, timeOf } from "@rowbase/kit";

/** A message field the contract always fills; its absence is a service bug (500, logged). */
export function required<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`${what} is missing from the service's answer`);
  return value;
}

/** An int64 count or size (limits, usage) as a JSON number; past 2^53 it could not be exact. */
export function countOf(value: bigint): number {
  if (value > BigInt(Number.MAX_SAFE_INTEGER) || value < BigInt(Number.MIN_SAFE_INTEGER)) {
    throw new Error(`count ${value} does not fit a JSON number`);
  }
  return Number(value);
}

/** A timestamp the contract may leave unset (e.g. a token never used): `null` on the wire. */
export function optionalTimeOf(timestamp: Timestamp | undefined): string | null {
  return timestamp ? timeOf(timestamp) : null;
}
