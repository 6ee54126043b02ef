/**
 * The deadlines of a schema change that converts stored values (README "Configuration",
 * `SCHEMA_CHANGE_TIMEOUT_SECONDS`), nested so that the client is told the truth: records'
 * conversion stops at catalog's deadline and rolls back whole; catalog, past it, rolls its
 * transaction back and releases records' side (at most `RELEASE_TIMEOUT_MS`, 1 s), or, within
 * it, commits and hands records the committed event (at most 1.5 s); the gateway waits for all
 * of that (`SCHEMA_CHANGE_MARGIN_MS` more), so it never answers 503 about a change catalog
 * then commits. The same margin as between the ordinary deadlines (catalog's 8 s for a
 * service, the gateway's 10 s).
 */
export const SCHEMA_CHANGE_MARGIN_MS = 2_000;

export interface SchemaChangeDeadlines {
  /** How long catalog waits for records' `CheckFieldTypeChange` (the conversion's deadline). */
  conversionMs: number;
  /** How long the gateway waits for catalog's answer to a change that converts. */
  requestMs: number;
}

/** The deadlines from `SCHEMA_CHANGE_TIMEOUT_SECONDS`. */
export function schemaChangeDeadlines(seconds: number): SchemaChangeDeadlines {
  const conversionMs = seconds * 1000;
  return { conversionMs, requestMs: conversionMs + SCHEMA_CHANGE_MARGIN_MS };
}
