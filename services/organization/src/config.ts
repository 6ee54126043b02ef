import { optionalUrl, optionalWholeNumber, port, serviceEnv, wholeNumber } from "@rowbase/kit";
import { z } from "zod";

const seconds = (fallback: number) => wholeNumber(1, Number.MAX_SAFE_INTEGER, fallback);

export const organizationEnv = z.object({
  ...serviceEnv.shape,
  NATS_URL: optionalUrl,
  GRPC_PORT: port(50052),
  /** The identity service, for members' e-mails and names (`http://host:port`). */
  IDENTITY_GRPC_URL: z.url(),
  SMTP_URL: optionalUrl,
  MAIL_FROM: z.string().default("Rowbase <no-reply@rowbase.local>"),
  /** Life of an owner-transfer code. */
  CODE_TTL_SECONDS: seconds(900),
  /** Life of an invitation. */
  INVITE_TTL_SECONDS: seconds(604_800),
  /** Where the REST API answers, for links in invitation mails. */
  PUBLIC_BASE_URL: optionalUrl,
  /**
   * The records service, asked for an organization's record count (RecordsService.
   * GetRecordUsage) in GetLimits. Unset until records runs: the count then reads 0.
   */
  RECORDS_GRPC_URL: optionalUrl,
  /**
   * The files service, asked for the bytes an organization stores (FilesService.
   * GetStorageUsage) in GetLimits. Unset until files runs: the usage then reads 0.
   */
  FILES_GRPC_URL: optionalUrl,
  /**
   * The catalog service, asked which organization owns a database or table (GetDatabase,
   * GetTableSchema) when the audit log is listed for one that has no stored events yet. Unset:
   * such a scope answers database_not_found/table_not_found.
   */
  CATALOG_GRPC_URL: optionalUrl,
  /**
   * How long PostgreSQL may work on an audit list (`statement_timeout`); unset: 10 s, the
   * gateway's deadline, past which nobody waits for the answer.
   */
  LIST_TIMEOUT_MS: optionalWholeNumber(1, 600_000),
});

export type OrganizationConfig = z.output<typeof organizationEnv>;
