import { CodePerRegistration } from "./code-per-registration.js";
import { InitialSchema } from "./initial-schema.js";
import { OidcSignIn } from "./oidc-sign-in.js";

/** Every committed migration, oldest first; a new one is appended, never inserted. */
export const migrations = [InitialSchema, OidcSignIn, CodePerRegistration];
