import { create, toBinary } from "@bufbuild/protobuf";
import { MemberRemovedSchema } from "@rowbase/proto/rowbase/events/v1/org_events_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  Authorizer,
  allows,
  createLogger,
  errorInfoOf,
  MEMBERSHIP_CHANGED,
  type MembershipLookup,
  membershipCacheKey,
  NatsBus,
  type Principal,
  RedisCache,
  type Role,
  STREAMS,
  SUBJECTS,
} from "../src/index.js";
import { testInfra, uniqueName } from "../src/testing.js";

const user = (userId: bigint): Principal => ({ kind: "user", userId, sessionId: "s" });
const roles = new Map<string, Role>();
let lookups = 0;
const lookup = async (organizationId: bigint, userId: bigint) => {
  lookups += 1;
  return roles.get(`${organizationId}:${userId}`);
};

let cache: RedisCache;
let bus: NatsBus;

beforeAll(async () => {
  const infra = await testInfra();
  cache = RedisCache.connect(infra.redisUrl, `${uniqueName("authz")}:`);
  bus = await NatsBus.connect(
    infra.natsUrl,
    createLogger("kit-test", "silent"),
    uniqueName("authz"),
  );
  await bus.ensureStreams(STREAMS);
});

afterAll(async () => {
  await bus?.deleteStreams(STREAMS.map((s) => s.name));
  await bus?.close();
  await cache?.close();
});

async function reasonOf(call: Promise<unknown>) {
  try {
    await call;
  } catch (error) {
    return errorInfoOf(error)?.reason;
  }
  return "allowed";
}

describe("allows", () => {
  it("encodes the role table of docs/conventions.md", () => {
    const table: Record<Role, boolean[]> = {
      owner: [true, true, true, true],
      admin: [true, true, true, false],
      editor: [true, true, false, false],
      viewer: [true, false, false, false],
    };
    for (const [role, row] of Object.entries(table)) {
      expect(
        (["read", "write", "manage", "own"] as const).map((p) => allows(role as Role, p)),
      ).toEqual(row);
    }
  });
});

describe("Authorizer", () => {
  it("answers 404 to non-members, 403 to members without the right, and the role otherwise", async () => {
    const authorizer = new Authorizer(lookup, cache);
    roles.set("1:10", "viewer");
    roles.set("1:11", "admin");
    expect(await reasonOf(authorizer.authorize(user(12n), 1n, "read", "database_not_found"))).toBe(
      "database_not_found",
    );
    expect(await reasonOf(authorizer.authorize(user(10n), 1n, "write", "database_not_found"))).toBe(
      "organization_forbidden",
    );
    expect(await authorizer.authorize(user(10n), 1n, "read", "database_not_found")).toBe("viewer");
    expect(await authorizer.authorize(user(11n), 1n, "manage", "x")).toBe("admin");
    expect(await reasonOf(authorizer.authorize(user(11n), 1n, "own", "x"))).toBe(
      "organization_forbidden",
    );
  });

  it("keeps API tokens inside their organization and read tokens away from writes", async () => {
    const authorizer = new Authorizer(lookup, cache);
    const read: Principal = { kind: "api_token", tokenId: 1n, organizationId: 5n, access: "read" };
    const write: Principal = {
      kind: "api_token",
      tokenId: 2n,
      organizationId: 5n,
      access: "read_write",
    };
    expect(await authorizer.authorize(read, 5n, "read", "table_not_found")).toBe("viewer");
    expect(await reasonOf(authorizer.authorize(read, 5n, "write", "table_not_found"))).toBe(
      "token_read_only",
    );
    expect(await authorizer.authorize(write, 5n, "write", "table_not_found")).toBe("editor");
    expect(await reasonOf(authorizer.authorize(write, 6n, "read", "table_not_found"))).toBe(
      "table_not_found",
    );
    expect(await reasonOf(authorizer.authorize(write, 5n, "manage", "x"))).toBe(
      "organization_forbidden",
    );
  });

  it("caches roles (non-members too) and forgets them on evict", async () => {
    const authorizer = new Authorizer(lookup, cache);
    roles.set("2:20", "editor");
    const before = lookups;
    await authorizer.roleOf(user(20n), 2n);
    await authorizer.roleOf(user(20n), 2n);
    await authorizer.roleOf(user(21n), 2n);
    await authorizer.roleOf(user(21n), 2n);
    expect(lookups - before).toBe(2);
    roles.delete("2:20");
    expect(await authorizer.roleOf(user(20n), 2n)).toBe("editor");
    await authorizer.evict(2n, 20n);
    expect(await authorizer.roleOf(user(20n), 2n)).toBeUndefined();
  });

  it("does not put back a role read just before the membership changed", async () => {
    let answer: (role: Role | undefined) => void = () => {};
    const slow: MembershipLookup = () => new Promise((resolve) => (answer = resolve));
    const authorizer = new Authorizer(slow, cache, 60);
    const pending = authorizer.roleOf(user(40n), 4n);
    await new Promise((r) => setTimeout(r, 20));
    // Removed while the lookup was on its way; the organization service marks the entry.
    await authorizer.evict(4n, 40n);
    answer("admin");
    expect(await pending).toBe("admin");
    expect(await cache.get(membershipCacheKey(4n, 40n))).toBe(MEMBERSHIP_CHANGED);
    const now = new Authorizer(async () => undefined, cache, 60);
    expect(await now.roleOf(user(40n), 4n)).toBeUndefined();
  });

  it("evicts a cached role when a member event arrives", async () => {
    const authorizer = new Authorizer(lookup, cache, 60);
    roles.set("3:30", "admin");
    expect(await authorizer.roleOf(user(30n), 3n)).toBe("admin");
    const listener = await authorizer.listen(bus, "authz_test");
    roles.delete("3:30");
    const event = create(MemberRemovedSchema, { organizationId: 3n, memberId: 1n, userId: 30n });
    await bus.publish(
      SUBJECTS.memberRemoved,
      toBinary(MemberRemovedSchema, event),
      crypto.randomUUID(),
    );
    await expect
      .poll(() => cache.get(membershipCacheKey(3n, 30n)), { timeout: 5000 })
      .toBe(MEMBERSHIP_CHANGED);
    expect(await authorizer.roleOf(user(30n), 3n)).toBeUndefined();
    await listener.stop();
  });
});
