import {
  type CatalogConfig,
  catalogEnv,
  migrateCatalog,
  type RunningCatalog,
  startCatalog,
} from "@rowbase/catalog";
import {
  type FilesConfig,
  filesEnv,
  migrateFiles,
  type RunningFiles,
  startFiles,
} from "@rowbase/files";
import {
  type IdentityConfig,
  identityEnv,
  migrateIdentity,
  type RunningIdentity,
  startIdentity,
} from "@rowbase/identity";
import type { ServiceDeps } from "@rowbase/kit";
import {
  migrateOrganization,
  type OrganizationConfig,
  organizationEnv,
  type RunningOrganization,
  startOrganization,
} from "@rowbase/organization";
import {
  migrateRecords,
  type RecordsConfig,
  type RunningRecords,
  recordsEnv,
  startRecords,
} from "@rowbase/records";
import {
  migrateWebhooks,
  type RunningWebhooks,
  startWebhooks,
  type WebhooksConfig,
  webhooksEnv,
} from "@rowbase/webhooks";

/** The services, each after those it cannot start without (records needs catalog's URL, say). */
export const SERVICE_NAMES = [
  "identity",
  "organization",
  "catalog",
  "records",
  "files",
  "webhooks",
] as const;

export type ServiceName = (typeof SERVICE_NAMES)[number];

export interface ServiceConfigs {
  identity: IdentityConfig;
  organization: OrganizationConfig;
  catalog: CatalogConfig;
  records: RecordsConfig;
  files: FilesConfig;
  webhooks: WebhooksConfig;
}

export interface RunningServices {
  identity: RunningIdentity;
  organization: RunningOrganization;
  catalog: RunningCatalog;
  records: RunningRecords;
  files: RunningFiles;
  webhooks: RunningWebhooks;
}

/** How one service is configured, migrated and started, and which others it calls. */
export interface ServicePiece<C, S> {
  env: { parse(env: Record<string, string | undefined>): C };
  migrate(databaseUrl: string): Promise<string[]>;
  start(config: C, deps: ServiceDeps): Promise<S>;
  /** The services it calls, each by the variable that says where that one answers gRPC. */
  calls: Partial<Record<ServiceName, string>>;
}

export const SERVICES: {
  [K in ServiceName]: ServicePiece<ServiceConfigs[K], RunningServices[K]>;
} = {
  identity: { env: identityEnv, migrate: migrateIdentity, start: startIdentity, calls: {} },
  organization: {
    env: organizationEnv,
    migrate: migrateOrganization,
    start: startOrganization,
    calls: {
      identity: "IDENTITY_GRPC_URL",
      catalog: "CATALOG_GRPC_URL",
      records: "RECORDS_GRPC_URL",
      files: "FILES_GRPC_URL",
    },
  },
  catalog: {
    env: catalogEnv,
    migrate: migrateCatalog,
    start: startCatalog,
    calls: { organization: "ORGANIZATION_GRPC_URL", records: "RECORDS_GRPC_URL" },
  },
  records: {
    env: recordsEnv,
    migrate: migrateRecords,
    start: startRecords,
    calls: {
      organization: "ORGANIZATION_GRPC_URL",
      catalog: "CATALOG_GRPC_URL",
      files: "FILES_GRPC_URL",
    },
  },
  files: {
    env: filesEnv,
    migrate: migrateFiles,
    start: startFiles,
    calls: {
      organization: "ORGANIZATION_GRPC_URL",
      catalog: "CATALOG_GRPC_URL",
      records: "RECORDS_GRPC_URL",
    },
  },
  webhooks: {
    env: webhooksEnv,
    migrate: migrateWebhooks,
    start: startWebhooks,
    calls: {
      organization: "ORGANIZATION_GRPC_URL",
      catalog: "CATALOG_GRPC_URL",
      records: "RECORDS_GRPC_URL",
    },
  },
};

/**
 * The `*_GRPC_URL` variables that point `name` at the services of `urls` it calls. One left out
 * of `urls` is not running: a service whose variable for it is optional then works without it.
 */
export function grpcUrlsOf(
  name: ServiceName,
  urls: Partial<Record<ServiceName, string>>,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [callee, variable] of Object.entries(SERVICES[name].calls)) {
    const url = urls[callee as ServiceName];
    if (url) env[variable] = url;
  }
  return env;
}
