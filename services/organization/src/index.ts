export { type OrganizationConfig, organizationEnv } from "./config.js";
export {
  migrateOrganization,
  type RunningOrganization,
  SCHEMA,
  startOrganization,
} from "./service.js";
