import { describe, expect, it } from "vitest";
import { statementWithoutValues } from "./tracing.js";

describe("statementWithoutValues", () => {
  it("replaces every literal, and nothing else", () => {
    expect(
      statementWithoutValues(
        `insert into "identity"."users" ("email", "password_hash", "n2") values ('a@b.c', '$argon2id$v=19$m=1''x', -3.5e2) returning "id"`,
      ),
    ).toBe(
      `insert into "identity"."users" ("email", "password_hash", "n2") values (?, ?, ?) returning "id"`,
    );
    expect(
      statementWithoutValues(`select "o0".* from t as o0 where o0.id = 17 and x = E'\\\\x78'`),
    ).toBe(`select "o0".* from t as o0 where o0.id = ? and x = ?`);
    expect(statementWithoutValues("select * from record where table_id = $1 limit $2")).toBe(
      "select * from record where table_id = $1 limit $2",
    );
  });
});
