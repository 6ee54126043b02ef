import { Migration } from "@mikro-orm/migrations";

/** Sign-in with an OpenID Connect provider: pending attempts and linked provider accounts. */
export class OidcSignIn extends Migration {
  override up() {
    this.addSql(`
      create table oidc_sign_in (
        state_hash text primary key,
        nonce text not null,
        code_verifier text not null,
        redirect_uri text not null,
        created_at timestamptz not null default now(),
        expires_at timestamptz not null
      );
      create index oidc_sign_in_expiry on oidc_sign_in (expires_at);
      create table oidc_identity (
        issuer text not null,
        subject text not null,
        user_id bigint not null references users (id) on delete cascade,
        created_at timestamptz not null default now(),
        primary key (issuer, subject)
      );
      create index oidc_identity_by_user on oidc_identity (user_id);
    `);
  }
}
