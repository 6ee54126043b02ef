export { revokedSessionKey } from "./accounts.js";
export { type IdentityConfig, identityEnv } from "./config.js";
export { generateSigningKey } from "./domain/access-tokens.js";
export { migrateIdentity, type RunningIdentity, SCHEMA, startIdentity } from "./service.js";
