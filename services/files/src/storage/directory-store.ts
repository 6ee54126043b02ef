import { randomBytes } from "node:crypto";
import { createWriteStream } from "node:fs";
import { mkdir, open, readdir, rename, rm, stat } from "node:fs/promises";
import path from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import {
  assertStorageKey,
  BlobNotFoundError,
  type BlobRange,
  type BlobStore,
  Meter,
  type StoredBlob,
} from "./blob-store.js";

const PARTIAL_MAX_AGE_MS = 24 * 3600 * 1000;

/**
 * Bytes as files under one directory: `<root>/<first two hex digits>/<key>`. A put writes to
 * `<root>/.partial/` and renames into place once complete, so a reader never sees half a file and
 * a failed put leaves nothing. Only keys of 32 hex digits are accepted, and every path is checked
 * to stay inside the root.
 */
export class DirectoryBlobStore implements BlobStore {
  readonly kind = "directory";
  private readonly root: string;

  constructor(root: string) {
    this.root = path.resolve(root);
  }

  private pathOf(key: string): string {
    assertStorageKey(key);
    return this.inside(path.join(this.root, key.slice(0, 2), key));
  }

  private inside(candidate: string): string {
    const resolved = path.resolve(candidate);
    if (!resolved.startsWith(this.root + path.sep)) {
      throw new Error(`path ${resolved} escapes the files directory`);
    }
    return resolved;
  }

  async put(
    key: string,
    body: AsyncIterable<Uint8Array>,
    options: { maxBytes: number },
  ): Promise<StoredBlob> {
    const target = this.pathOf(key);
    const partialDir = this.inside(path.join(this.root, ".partial"));
    const partial = this.inside(path.join(partialDir, `${key}.${randomBytes(6).toString("hex")}`));
    await mkdir(partialDir, { recursive: true });
    await mkdir(path.dirname(target), { recursive: true });
    const meter = new Meter(options.maxBytes);
    try {
      await pipeline(
        Readable.from(meter.pass(body), { objectMode: false }),
        createWriteStream(partial, { flags: "wx", flush: true }),
      );
      await rename(partial, target);
    } catch (error) {
      await rm(partial, { force: true });
      throw error;
    }
    return meter.result();
  }

  async get(key: string, range?: BlobRange): Promise<AsyncIterable<Uint8Array>> {
    const file = this.pathOf(key);
    // Opened here, so that a missing file fails the call rather than the stream.
    const handle = await open(file, "r").catch((error: NodeJS.ErrnoException) => {
      throw error.code === "ENOENT" ? new BlobNotFoundError(key) : error;
    });
    return handle.createReadStream({
      ...(range ? { start: range.first, end: range.last } : {}),
      highWaterMark: 64 * 1024,
      autoClose: true,
    });
  }

  async delete(key: string): Promise<void> {
    await rm(this.pathOf(key), { force: true });
  }

  /** Removes partial files older than a day: no put takes that long. */
  async sweep(): Promise<number> {
    const partialDir = this.inside(path.join(this.root, ".partial"));
    const names = await readdir(partialDir).catch(() => [] as string[]);
    let removed = 0;
    for (const name of names) {
      const file = this.inside(path.join(partialDir, name));
      const info = await stat(file).catch(() => undefined);
      if (info && Date.now() - info.mtimeMs > PARTIAL_MAX_AGE_MS) {
        await rm(file, { force: true });
        removed += 1;
      }
    }
    return removed;
  }

  async close(): Promise<void> {}
}
