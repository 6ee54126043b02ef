import type { StorageSettings } from "../config.js";
import type { BlobStore } from "./blob-store.js";
import { DirectoryBlobStore } from "./directory-store.js";
import { S3BlobStore } from "./s3-store.js";

export * from "./blob-store.js";
export { DirectoryBlobStore } from "./directory-store.js";
export { S3BlobStore, type S3BlobStoreOptions } from "./s3-store.js";

/** The backend the configuration names: S3 when its settings are given, else the directory. */
export function createBlobStore(settings: StorageSettings): BlobStore {
  if (settings.kind === "s3") return new S3BlobStore(settings);
  return new DirectoryBlobStore(settings.dir);
}
