import { createHash } from "node:crypto";
import { mkdir, mkdtemp, readdir, rm, utimes, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { type S3Server, startS3Server } from "@rowbase/standalone/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  BlobNotFoundError,
  type BlobStore,
  BlobTooLargeError,
  DirectoryBlobStore,
  newStorageKey,
  S3BlobStore,
} from "../src/storage/index.js";

async function* chunks(total: number, size = 64 * 1024, seed = 7): AsyncGenerator<Uint8Array> {
  let sent = 0;
  while (sent < total) {
    const n = Math.min(size, total - sent);
    const chunk = Buffer.alloc(n);
    for (let i = 0; i < n; i++) chunk[i] = (sent + i + seed) % 251;
    sent += n;
    yield chunk;
  }
}

function expected(total: number, seed = 7): Buffer {
  const buffer = Buffer.alloc(total);
  for (let i = 0; i < total; i++) buffer[i] = (i + seed) % 251;
  return buffer;
}

async function read(body: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of body) parts.push(Buffer.from(part));
  return Buffer.concat(parts);
}

/** Every regular file under a directory, recursively. */
async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  return entries.filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name));
}

const backends: {
  name: string;
  open: () => Promise<{
    store: BlobStore;
    stored: () => Promise<string[]>;
    /** Where the directory store writes before renaming. */
    partialDir?: string;
    close(): Promise<void>;
  }>;
}[] = [
  {
    name: "directory",
    async open() {
      const dir = await mkdtemp(path.join(os.tmpdir(), "rowbase-files-"));
      return {
        store: new DirectoryBlobStore(dir),
        stored: () => filesUnder(dir),
        partialDir: path.join(dir, ".partial"),
        close: () => rm(dir, { recursive: true, force: true }),
      };
    },
  },
  {
    name: "s3",
    async open() {
      const s3: S3Server = await startS3Server();
      const store = new S3BlobStore({
        endpoint: s3.env.S3_ENDPOINT,
        bucket: s3.env.S3_BUCKET,
        region: "us-east-1",
        accessKeyId: s3.env.S3_ACCESS_KEY_ID,
        secretAccessKey: s3.env.S3_SECRET_ACCESS_KEY,
        partBytes: 5 * 1024 * 1024,
      });
      return {
        store,
        // s3rver keeps each object as a directory with the content and metadata files.
        stored: async () =>
          (await filesUnder(s3.directory)).filter((f) => f.endsWith("._S3rver_object")),
        async close() {
          await store.close();
          await s3.close();
        },
      };
    },
  },
];

describe.each(backends)("$name blob store", ({ open }) => {
  let backend: Awaited<ReturnType<(typeof backends)[number]["open"]>>;

  beforeAll(async () => {
    backend = await open();
  });

  afterAll(async () => {
    await backend?.close();
  });

  it("stores a streamed body, hashing and counting it, and reads it back whole or in ranges", async () => {
    const key = newStorageKey();
    const total = 200_000;
    const stored = await backend.store.put(key, chunks(total), { maxBytes: total });
    const bytes = expected(total);
    expect(stored).toEqual({
      size: total,
      sha256: createHash("sha256").update(bytes).digest("hex"),
    });
    expect((await read(await backend.store.get(key))).equals(bytes)).toBe(true);
    expect(
      (await read(await backend.store.get(key, { first: 1000, last: 70_999 }))).equals(
        bytes.subarray(1000, 71_000),
      ),
    ).toBe(true);
    expect(
      (await read(await backend.store.get(key, { first: total - 1, last: total - 1 }))).equals(
        bytes.subarray(total - 1),
      ),
    ).toBe(true);
  });

  it("stores an empty body", async () => {
    const key = newStorageKey();
    expect(await backend.store.put(key, chunks(0), { maxBytes: 10 })).toEqual({
      size: 0,
      sha256: createHash("sha256").digest("hex"),
    });
    expect((await read(await backend.store.get(key))).length).toBe(0);
  });

  it("stores bodies larger than one part (multipart on S3)", async () => {
    const key = newStorageKey();
    const total = 11 * 1024 * 1024 + 123;
    const stored = await backend.store.put(key, chunks(total, 256 * 1024, 3), {
      maxBytes: total,
    });
    expect(stored.size).toBe(total);
    const back = await read(await backend.store.get(key));
    expect(back.length).toBe(total);
    expect(createHash("sha256").update(back).digest("hex")).toBe(stored.sha256);
    await backend.store.delete(key);
  });

  it("stops a body past maxBytes and leaves nothing behind, even after a part went up", async () => {
    const before = await backend.stored();
    expect(before.length).toBeGreaterThan(0); // what earlier tests stored is seen

    const key = newStorageKey();
    await expect(
      backend.store.put(key, chunks(100_001), { maxBytes: 100_000 }),
    ).rejects.toBeInstanceOf(BlobTooLargeError);
    const big = newStorageKey();
    await expect(
      backend.store.put(big, chunks(6 * 1024 * 1024, 256 * 1024), { maxBytes: 5_500_000 }),
    ).rejects.toBeInstanceOf(BlobTooLargeError);
    await expect(backend.store.get(key)).rejects.toBeInstanceOf(BlobNotFoundError);
    await expect(backend.store.get(big)).rejects.toBeInstanceOf(BlobNotFoundError);
    expect(await backend.stored()).toEqual(before);
  });

  it("leaves nothing when the body itself fails", async () => {
    const before = await backend.stored();
    const key = newStorageKey();
    async function* failing() {
      yield Buffer.alloc(1000, 1);
      throw new Error("client went away");
    }
    await expect(backend.store.put(key, failing(), { maxBytes: 10_000 })).rejects.toThrow(
      "client went away",
    );
    expect(await backend.stored()).toEqual(before);
  });

  it("sweeps leftovers of interrupted writes older than a day", async () => {
    if (!backend.store.sweep) return;
    const dir = backend.partialDir!;
    await mkdir(dir, { recursive: true });
    const stale = path.join(dir, `${newStorageKey()}.dead`);
    const fresh = path.join(dir, `${newStorageKey()}.writing`);
    await writeFile(stale, "x");
    await writeFile(fresh, "y");
    const dayAgo = new Date(Date.now() - 25 * 3600 * 1000);
    await utimes(stale, dayAgo, dayAgo);
    expect(await backend.store.sweep()).toBe(1);
    expect(await readdir(dir)).toEqual([path.basename(fresh)]);
    await rm(fresh);
  });

  it("deletes, idempotently, and refuses keys it could not have made", async () => {
    const key = newStorageKey();
    await backend.store.put(key, chunks(10), { maxBytes: 10 });
    await backend.store.delete(key);
    await backend.store.delete(key);
    await expect(backend.store.get(key)).rejects.toBeInstanceOf(BlobNotFoundError);
    for (const bad of ["../etc/passwd", "ab/../../x", "ABCDEF", "", `${key}/x`]) {
      await expect(backend.store.get(bad)).rejects.toThrow(/invalid storage key/);
      await expect(backend.store.put(bad, chunks(1), { maxBytes: 1 })).rejects.toThrow(
        /invalid storage key/,
      );
    }
  });
});
