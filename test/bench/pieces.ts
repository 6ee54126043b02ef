/** The processes of Rowbase, in the order they start (as the one-process launcher starts them). */
export const PIECES = [
  "identity",
  "organization",
  "catalog",
  "records",
  "files",
  "webhooks",
  "gateway",
] as const;
export type Piece = (typeof PIECES)[number];

/** The pieces with a database schema, migrated (`main.js migrate`) before anything starts. */
export const MIGRATED: readonly Piece[] = [
  "identity",
  "organization",
  "catalog",
  "records",
  "files",
  "webhooks",
];
