/** A requested range, as ByteRange carries it (HTTP `bytes=first-last`, `first-`, `-suffix`). */
export interface RequestedRange {
  first: bigint;
  last?: bigint | undefined;
  suffixLength?: bigint | undefined;
}

/** Bytes `first` to `last` of a file, inclusive, both inside it. */
export interface ResolvedRange {
  first: number;
  last: number;
}

/**
 * The bytes a range names in a file of `size` bytes, following RFC 9110 section 14.1.2: a last
 * byte past the end means the end, a suffix longer than the file means all of it. Undefined
 * when no range was asked for (the whole file, 200). `"unsatisfiable"` when the range starts at
 * or past the end, is a zero-length suffix, is reversed (last < first), or the file is empty
 * (416).
 */
export function resolveRange(
  range: RequestedRange | undefined,
  size: number,
): ResolvedRange | "unsatisfiable" | undefined {
  if (!range) return undefined;
  if (range.suffixLength !== undefined) {
    const suffix = range.suffixLength;
    if (suffix <= 0n || size === 0) return "unsatisfiable";
    const first = suffix >= BigInt(size) ? 0 : size - Number(suffix);
    return { first, last: size - 1 };
  }
  if (range.first < 0n || range.first >= BigInt(size)) return "unsatisfiable";
  const first = Number(range.first);
  if (range.last === undefined) return { first, last: size - 1 };
  if (range.last < range.first) return "unsatisfiable";
  const last = range.last >= BigInt(size) ? size - 1 : Number(range.last);
  return { first, last };
}
