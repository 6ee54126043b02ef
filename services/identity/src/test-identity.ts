import { createServiceClient } from "@rowbase/kit";
import { type TestStack, uniqueName } from "@rowbase/kit/testing";
import { IdentityService } from "@rowbase/proto/rowbase/identity/v1/identity_service_pb";
import { identityEnv } from "./config.js";
import { generateSigningKey } from "./domain/access-tokens.js";
import { migrateIdentity, startIdentity } from "./service.js";

export interface TestUser {
  id: bigint;
  email: string;
  name: string;
}

/** The identity service of a test stack, and the users it registers. */
export interface TestIdentity {
  /** Its gRPC URL, for the IDENTITY_GRPC_URL of the services that ask it. */
  url: string;
  /** A newly registered user, its e-mail verified with the code mailed to it unless `verified` is false. */
  user(name?: string, options?: { verified?: boolean }): Promise<TestUser>;
}

let counter = 0;

/** Migrates and starts the real identity service on `stack`, mailing to the stack's catcher. */
export async function startTestIdentity(stack: TestStack): Promise<TestIdentity> {
  await migrateIdentity(stack.databaseUrl);
  const { url } = await stack.serve(identityEnv, startIdentity, {
    SMTP_URL: stack.mail.url,
    JWT_SIGNING_KEYS: JSON.stringify([await generateSigningKey()]),
  });
  const client = createServiceClient(IdentityService, url);
  return {
    url,
    async user(name = "Ada", { verified = true } = {}) {
      counter += 1;
      const email = `user${counter}.${uniqueName("u")}@example.test`;
      const before = stack.mail.messages.length;
      await client.register({ email, password: "correct horse battery", name });
      if (verified) {
        const message = await stack.mail.next(email, before);
        const code = /code: (\d{6})/.exec(message.subject)![1]!;
        await client.verifyEmail({ email, code });
      }
      const { rows } = await stack.db.query("select id from identity.users where email = $1", [
        email,
      ]);
      return { id: BigInt(rows[0].id), email, name };
    },
  };
}
