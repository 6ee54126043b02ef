import {
  type Cache,
  type Logger,
  type RunningService,
  serveService,
  serviceDatabase,
} from "@rowbase/kit";
import { createMailer } from "@rowbase/kit/mailer";
import { IdentityService } from "@rowbase/proto/rowbase/identity/v1/identity_service_pb";
import { Accounts } from "./accounts.js";
import { type IdentityConfig, oidcSettingsOf } from "./config.js";
import { entities } from "./db/entities.js";
import { AccessTokenSigner } from "./domain/access-tokens.js";
import { migrations } from "./migrations/index.js";
import { OidcSignIn } from "./oidc-sign-in.js";
import { createRoutes } from "./server.js";

export const SCHEMA = "identity";

const database = serviceDatabase(SCHEMA, entities, migrations);
export const createIdentityOrm = database.open;
export const migrateIdentity = database.migrate;

export type RunningIdentity = RunningService;

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
  return serveService(
    config,
    deps.logger,
    { routes: createRoutes({ accounts, signer, oidc }), services: [IdentityService] },
    {
      async close() {
        mailer.close();
        await orm.close();
      },
    },
  );
}
