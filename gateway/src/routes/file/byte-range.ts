/**
 * HTTP Range requests for file serving (RFC 9110 section 14): one range of bytes is served
 * (206); anything else the gateway is allowed to ignore is ignored and the whole file is served
 * (200): another unit, a malformed or reversed range, several ranges (no multipart/byteranges,
 * whose many small ranges are a known way to make a server work hard).
 */

/** One range as ByteRange carries it to the files service. */
export type RequestedRange =
  /** `bytes=first-last` or `bytes=first-` (to the end). */
  | { first: bigint; last?: bigint }
  /** `bytes=-n`: the last n bytes. */
  | { first: bigint; suffixLength: bigint };

const INT64_MAX = 2n ** 63n - 1n;
const RANGES = /^bytes[ \t]*=[ \t]*(.*)$/i;
const RANGE = /^([0-9]*)[ \t]*-[ \t]*([0-9]*)$/;

/** A position past any file is capped: it reads the same (to the end, or past it). */
function int64(digits: string): bigint {
  const value = BigInt(digits.replace(/^0+(?=[0-9])/, "").slice(0, 20));
  return value <= INT64_MAX ? value : INT64_MAX;
}

/**
 * The one range a `Range` header asks for, or undefined when the whole file is to be served.
 * Whether the range fits the file (416 when it starts past the end) is the service's to say: it
 * knows the size.
 */
export function parseRangeHeader(header: string | undefined): RequestedRange | undefined {
  if (!header) return undefined;
  const ranges = RANGES.exec(header.trim());
  if (!ranges) return undefined;
  const spec = ranges[1]!.trim();
  if (spec.includes(",")) return undefined;
  const range = RANGE.exec(spec);
  if (!range) return undefined;
  const [, firstDigits = "", lastDigits = ""] = range;
  if (firstDigits === "") {
    if (lastDigits === "") return undefined;
    return { first: 0n, suffixLength: int64(lastDigits) };
  }
  const first = int64(firstDigits);
  if (lastDigits === "") return { first };
  const last = int64(lastDigits);
  if (last < first) return undefined;
  return { first, last };
}

/** `Content-Range` of a 206 answer: `bytes first-last/size`. */
export function contentRangeOf(first: bigint, last: bigint, size: bigint): string {
  return `bytes ${first}-${last}/${size}`;
}
