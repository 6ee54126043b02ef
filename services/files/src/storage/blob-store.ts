import { createHash, randomBytes } from "node:crypto";

/** What a completed `put` stored. */
export interface StoredBlob {
  /** Bytes. */
  size: number;
  /** Lower-case hex SHA-256 of the bytes. */
  sha256: string;
}

/** Bytes `first` to `last` of a blob, both inclusive and inside it. */
export interface BlobRange {
  first: number;
  last: number;
}

/**
 * Where the bytes of files live, by storage key. Bytes stream through in both directions; no
 * implementation holds a whole file in memory. Keys come from `newStorageKey` only.
 */
export interface BlobStore {
  readonly kind: "directory" | "s3";
  /**
   * Stores the bytes under `key`, hashing and counting them on the way. Past `maxBytes` it stops
   * reading, removes whatever it wrote and throws `BlobTooLargeError`; any other failure also
   * leaves nothing behind. The body's own errors propagate unchanged.
   */
  put(
    key: string,
    body: AsyncIterable<Uint8Array>,
    options: { maxBytes: number },
  ): Promise<StoredBlob>;
  /** The bytes of `key`, or of one range of them; `BlobNotFoundError` when there are none. */
  get(key: string, range?: BlobRange): Promise<AsyncIterable<Uint8Array>>;
  /** Removes the bytes; removing missing bytes succeeds (deletions are retried). */
  delete(key: string): Promise<void>;
  /** Removes leftovers of puts whose process died mid-way (run now and then). */
  sweep?(): Promise<number>;
  close(): Promise<void>;
}

export class BlobTooLargeError extends Error {
  constructor(readonly maxBytes: number) {
    super(`blob larger than ${maxBytes} bytes`);
    this.name = "BlobTooLargeError";
  }
}

export class BlobNotFoundError extends Error {
  constructor(readonly key: string) {
    super(`no blob under ${key}`);
    this.name = "BlobNotFoundError";
  }
}

const KEY = /^[0-9a-f]{32}$/;

/** A random storage key (128 bits, hex): never derived from a file's name or owner. */
export function newStorageKey(): string {
  return randomBytes(16).toString("hex");
}

/** Refuses anything that is not a key `newStorageKey` could have made. */
export function assertStorageKey(key: string): void {
  if (!KEY.test(key)) throw new Error(`invalid storage key ${JSON.stringify(key)}`);
}

/**
 * Counts and hashes a body as it passes, throwing `BlobTooLargeError` as soon as it goes past
 * `maxBytes` (before the excess is handed on). `result()` is valid once the body is exhausted.
 */
export class Meter {
  private size = 0;
  private readonly hash = createHash("sha256");

  constructor(private readonly maxBytes: number) {}

  async *pass(body: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
    for await (const chunk of body) {
      if (chunk.byteLength === 0) continue;
      this.size += chunk.byteLength;
      if (this.size > this.maxBytes) throw new BlobTooLargeError(this.maxBytes);
      this.hash.update(chunk);
      yield chunk;
    }
  }

  result(): StoredBlob {
    return { size: this.size, sha256: this.hash.digest("hex") };
  }
}
