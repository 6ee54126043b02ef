import {
  changeRetentionSeconds,
  optionalUrl,
  optionalWholeNumber,
  port,
  serviceEnv,
  wholeNumber,
} from "@rowbase/kit";
import { z } from "zod";

export const recordsEnv = z.object({
  ...serviceEnv.shape,
  NATS_URL: optionalUrl,
  GRPC_PORT: port(50054),
  /** The organization service, for members' roles and plans (`http://host:port`). */
  ORGANIZATION_GRPC_URL: z.url(),
  /** The catalog service, for table schemas (`http://host:port`). */
  CATALOG_GRPC_URL: z.url(),
  /**
   * The files service, asked for the live files of the records a response shows
   * (FilesService.ListRecordFiles). Unset until files runs: file fields then show null.
   */
  FILES_GRPC_URL: optionalUrl,
  /**
   * How long PostgreSQL may work on a list's statements (`statement_timeout`); unset: 10 s, the
   * gateway's deadline, past which nobody waits for the answer.
   */
  LIST_TIMEOUT_MS: optionalWholeNumber(1, 600_000),
  CHANGE_RETENTION_SECONDS: changeRetentionSeconds,
  /**
   * How often committed changes are given their positions when no write of this process woke the
   * sequencer (a writer that went away first); 250 ms.
   */
  CHANGE_SEQUENCE_INTERVAL_MS: wholeNumber(10, 60_000, 250),
  /**
   * Whether this replica runs the upgrade of the storage, which moves the tables still stored in
   * `record` into their own tables and then drops `record` (docs/records-storage.md, step 6):
   * `on` (one replica at a time runs it), or `off` to hold it, say until a quiet hour (a table's
   * writes wait while it moves).
   */
  STORAGE_UPGRADE: z.enum(["on", "off"]).default("on"),
});

export type RecordsConfig = z.output<typeof recordsEnv>;
