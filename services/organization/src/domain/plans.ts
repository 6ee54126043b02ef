/** The plans (docs/limits.md); `enterprise` has limits configured per organization. */
export const PLANS = ["free", "plus", "business", "enterprise"] as const;
export type Plan = (typeof PLANS)[number];

export const LIMIT_KEYS = [
  "records",
  "apiCallsPerMonth",
  "fileStorageBytes",
  "transferBytesPerMonth",
  "members",
  "maxFileBytes",
  "changeStreams",
  "webhooks",
  "forms",
] as const;
export type LimitKey = (typeof LIMIT_KEYS)[number];

/** What a plan allows; sizes in bytes, monthly counts per UTC calendar month. */
export type PlanLimits = Record<LimitKey, bigint>;

const MB = 1_000_000n;
const GB = 1_000_000_000n;

/** The fixed plans (MB and GB are decimal). */
export const FIXED_PLAN_LIMITS: Record<Exclude<Plan, "enterprise">, PlanLimits> = {
  free: {
    records: 1_000n,
    apiCallsPerMonth: 3_000n,
    fileStorageBytes: 100n * MB,
    transferBytesPerMonth: 1n * GB,
    members: 3n,
    maxFileBytes: 10n * MB,
    changeStreams: 5n,
    webhooks: 5n,
    forms: 3n,
  },
  plus: {
    records: 50_000n,
    apiCallsPerMonth: 150_000n,
    fileStorageBytes: 5n * GB,
    transferBytesPerMonth: 25n * GB,
    members: 10n,
    maxFileBytes: 100n * MB,
    changeStreams: 25n,
    webhooks: 25n,
    forms: 20n,
  },
  business: {
    records: 1_000_000n,
    apiCallsPerMonth: 5_000_000n,
    fileStorageBytes: 50n * GB,
    transferBytesPerMonth: 250n * GB,
    members: 30n,
    maxFileBytes: 1n * GB,
    changeStreams: 100n,
    webhooks: 100n,
    forms: 100n,
  },
};

/**
 * What an enterprise organization whose stored limits predate a limit gets for it, and what the
 * admin command sets when it is not given: the business plan's value. The first limits have
 * always been stored, so they have none.
 */
export const LATER_LIMIT_DEFAULTS: Partial<Record<LimitKey, bigint>> = {
  changeStreams: FIXED_PLAN_LIMITS.business.changeStreams,
  webhooks: FIXED_PLAN_LIMITS.business.webhooks,
  forms: FIXED_PLAN_LIMITS.business.forms,
};

/** Organizations one user may own at a time. */
export const MAX_OWNED_ORGANIZATIONS = 5;

/** The REST and storage name of each limit (`organizations.enterprise_limits` keys). */
export const LIMIT_NAMES: Record<LimitKey, string> = {
  records: "records",
  apiCallsPerMonth: "api_calls_per_month",
  fileStorageBytes: "file_storage_bytes",
  transferBytesPerMonth: "transfer_bytes_per_month",
  members: "members",
  maxFileBytes: "max_file_bytes",
  changeStreams: "change_streams",
  webhooks: "webhooks",
  forms: "forms",
};

/** Enterprise limits as stored in `organizations.enterprise_limits`: JSON numbers by name. */
export type StoredLimits = Record<string, number>;

export function limitsOf(plan: Plan, enterprise: StoredLimits | null | undefined): PlanLimits {
  if (plan !== "enterprise") return FIXED_PLAN_LIMITS[plan];
  if (!enterprise) throw new Error("an enterprise organization without limits");
  // Limits added after an organization's were set take the business plan's value until set.
  return Object.fromEntries(
    LIMIT_KEYS.map((key) => {
      const stored = enterprise[LIMIT_NAMES[key]];
      return [key, stored === undefined ? (LATER_LIMIT_DEFAULTS[key] ?? 0n) : BigInt(stored)];
    }),
  ) as PlanLimits;
}

/**
 * Problems of operator-given enterprise limits, by limit name: every limit a whole number that
 * JSON stores exactly, and room for at least the owner.
 */
export function enterpriseLimitProblems(limits: PlanLimits): { key: string; message: string }[] {
  const problems: { key: string; message: string }[] = [];
  for (const key of LIMIT_KEYS) {
    const value = limits[key];
    if (value < 0n || value > BigInt(Number.MAX_SAFE_INTEGER)) {
      problems.push({ key: LIMIT_NAMES[key], message: `must be 0 to ${Number.MAX_SAFE_INTEGER}` });
    }
  }
  if (limits.members < 1n) problems.push({ key: "members", message: "must be at least 1" });
  return problems;
}

export function storedLimits(limits: PlanLimits): StoredLimits {
  return Object.fromEntries(LIMIT_KEYS.map((key) => [LIMIT_NAMES[key], Number(limits[key])]));
}
