import {
  type Cache,
  createMailer,
  createOrm,
  type GrpcServer,
  type Logger,
  migrate,
  type Orm,
  startGrpcServer,
} from "@rowbase/kit";
import { IdentityService } from "@rowbase/proto/rowbase/identity/v1/identity_service_pb";
import { Accounts } from "./accounts.js";
import { type IdentityConfig, oidcSettingsOf } from "./config.js";
import { entities } from "./db/entities.js";
import { AccessTokenSigner } from "./domain/access-tokens.js";
import { migrations } from "./migrations/index.js";
import { OidcSignIn } from "./oidc-sign-in.js";
import { createRoutes } from "./server.js";

export const SCHEMA = "identity";

export function createIdentityOrm(
  databaseUrl: string,
  logger?: Logger,
  poolSize?: number,
): Promise<Orm> {
  return createOrm({ url: databaseUrl, schema: SCHEMA, entities, migrations, logger, poolSize });
}

export async function migrateIdentity(databaseUrl: string): Promise<string[]> {
  const orm = await createIdentityOrm(databaseUrl);
  try {
    return await migrate(orm, SCHEMA);
  } finally {
    await orm.close();
  }
}

export interface RunningIdentity {
  server: GrpcServer;
  stop(): Promise<void>;
}

/** Starts the identity service on its gRPC port with the given shared pieces. */
export async function startIdentity(
  config: IdentityConfig,
  deps: { logger: Logger; cache: Cache },
): Promise<RunningIdentity> {
  const orm = await createIdentityOrm(config.DATABASE_URL, deps.logger, config.DATABASE_POOL_MAX);
  const mailer = createMailer(config.SMTP_URL, config.MAIL_FROM, deps.logger);
  const signer = await AccessTokenSigner.create(
    config.JWT_SIGNING_KEYS,
    config.ACCESS_TOKEN_TTL_SECONDS,
  );
  const accounts = new Accounts({
    orm,
    cache: deps.cache,
    mailer,
    logger: deps.logger,
    signer,
    config,
  });
  const oidc = new OidcSignIn({
    orm,
    accounts,
    settings: oidcSettingsOf(config),
    logger: deps.logger,
  });
  const server = await startGrpcServer({
    routes: createRoutes({ accounts, signer, oidc }),
    services: [IdentityService],
    host: config.GRPC_HOST,
    port: config.GRPC_PORT,
    logger: deps.logger,
    internalSecret: config.INTERNAL_JWT_SECRET,
    previousInternalSecret: config.INTERNAL_JWT_SECRET_PREVIOUS,
  });
  return {
    server,
    async stop() {
      await server.close();
      mailer.close();
      await orm.close();
    },
  };
}
