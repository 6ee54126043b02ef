export { type FilesConfig, filesEnv } from "./config.js";
export {
  type FilesOptions,
  migrateFiles,
  type RunningFiles,
  SCHEMA,
  startFiles,
} from "./service.js";
export {
  BlobNotFoundError,
  type BlobRange,
  type BlobStore,
  BlobTooLargeError,
  DirectoryBlobStore,
  newStorageKey,
  S3BlobStore,
  type StoredBlob,
} from "./storage/index.js";
