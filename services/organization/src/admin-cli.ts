import { parseArgs } from "node:util";
import { create } from "@bufbuild/protobuf";
import { callAs, createServiceClient } from "@rowbase/kit";
import { PlanLimitsSchema, PlanName } from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { enterpriseLimitProblems, LATER_LIMIT_DEFAULTS } from "./domain/plans.js";

const USAGE = `usage: npm run admin -- set-plan <organization_id> <free|plus|business|enterprise> [limits]

Limits (required for enterprise, refused otherwise):
  --records N  --api-calls-per-month N  --file-storage-bytes N
  --transfer-bytes-per-month N  --members N  --max-file-bytes N
Optional for enterprise (default: the business plan's): --change-streams N  --webhooks N

Environment: ORGANIZATION_GRPC_URL (default http://127.0.0.1:50052) and INTERNAL_JWT_SECRET
(default: the secret of the local installation in $DATA_DIR/secrets.json, as npm start keeps it).`;

const PLANS = {
  free: PlanName.FREE,
  plus: PlanName.PLUS,
  business: PlanName.BUSINESS,
  enterprise: PlanName.ENTERPRISE,
} as const;

const LIMIT_FLAGS = {
  records: "records",
  "api-calls-per-month": "apiCallsPerMonth",
  "file-storage-bytes": "fileStorageBytes",
  "transfer-bytes-per-month": "transferBytesPerMonth",
  members: "members",
  "max-file-bytes": "maxFileBytes",
  "change-streams": "changeStreams",
  webhooks: "webhooks",
  forms: "forms",
} as const;

/** Limits an enterprise command may leave out: they take `LATER_LIMIT_DEFAULTS`. */
const OPTIONAL_FLAGS: ReadonlySet<string> = new Set(["change-streams", "webhooks", "forms"]);

export interface AdminTarget {
  organizationUrl: string;
  internalSecret: string;
}

/** Thrown for a command line that does not fit; the message is for the operator. */
export class UsageError extends Error {}

/** Runs one admin command and returns what to print. */
export async function runAdminCommand(args: string[], target: AdminTarget): Promise<string> {
  const { positionals, values } = parseArgs({
    args,
    allowPositionals: true,
    options: Object.fromEntries(Object.keys(LIMIT_FLAGS).map((flag) => [flag, { type: "string" }])),
  });
  const [command, organization, plan, ...rest] = positionals;
  if (command !== "set-plan" || !organization || !plan || rest.length > 0)
    throw new UsageError(USAGE);
  if (!/^[1-9][0-9]{0,15}$/.test(organization))
    throw new UsageError("organization_id must be a positive integer");
  if (!(plan in PLANS))
    throw new UsageError(`unknown plan ${plan}; one of ${Object.keys(PLANS).join(", ")}`);
  const given = Object.entries(values).filter(([, value]) => value !== undefined);
  if (plan !== "enterprise" && given.length > 0)
    throw new UsageError("limits can only be set for enterprise");
  const required = Object.keys(LIMIT_FLAGS).filter((flag) => !OPTIONAL_FLAGS.has(flag));
  if (plan === "enterprise" && !required.every((flag) => values[flag] !== undefined)) {
    throw new UsageError(
      `enterprise needs every limit: ${required.map((f) => `--${f}`).join(" ")}`,
    );
  }
  const limits = create(PlanLimitsSchema, {
    changeStreams: LATER_LIMIT_DEFAULTS.changeStreams ?? 0n,
    webhooks: LATER_LIMIT_DEFAULTS.webhooks ?? 0n,
    forms: LATER_LIMIT_DEFAULTS.forms ?? 0n,
  });
  for (const [flag, value] of given) {
    if (typeof value !== "string" || !/^[0-9]{1,18}$/.test(value))
      throw new UsageError(`--${flag} must be a number`);
    limits[LIMIT_FLAGS[flag as keyof typeof LIMIT_FLAGS]] = BigInt(value);
  }
  // Checked here too, so that the operator reads which limit is wrong and why: the service
  // answers only validation_failed.
  const problems = plan === "enterprise" ? enterpriseLimitProblems(limits) : [];
  if (problems.length > 0) {
    throw new UsageError(
      problems.map((p) => `--${p.key.replaceAll("_", "-")} ${p.message}`).join("\n"),
    );
  }

  const client = createServiceClient(OrganizationService, target.organizationUrl);
  const answer = await client.setPlan(
    {
      organizationId: BigInt(organization),
      plan: PLANS[plan as keyof typeof PLANS],
      enterpriseLimits: plan === "enterprise" ? limits : undefined,
    },
    await callAs(target.internalSecret, { kind: "operator", name: "admin-cli" }),
  );
  const shown = Object.fromEntries(
    Object.entries(answer.limits ?? {})
      .filter(([key]) => !key.startsWith("$"))
      .map(([key, value]) => [key, String(value)]),
  );
  return `organization ${organization} is now on ${plan}: ${JSON.stringify(shown)}`;
}
