export { EMBEDDED_INITDB_FLAGS } from "./embedded-postgres.js";
export { type RunningSystem, type SystemOptions, startSystem } from "./system.js";
