export { type CatalogConfig, catalogEnv } from "./config.js";
export { migrateCatalog, type RunningCatalog, SCHEMA, startCatalog } from "./service.js";
