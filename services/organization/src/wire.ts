import { create } from "@bufbuild/protobuf";
import {
  InviteStatus,
  type PlanLimits as PlanLimitsMessage,
  PlanLimitsSchema,
  PlanName,
  TokenAccess,
} from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import type { Plan, PlanLimits } from "./domain/plans.js";

/**
 * The mappings between the contract's enums and the names stored in the database (which are
 * also their REST names: "read_write", "free", ...); roles map in the kit.
 */
const PLAN_TO_PROTO: Record<Plan, PlanName> = {
  free: PlanName.FREE,
  plus: PlanName.PLUS,
  business: PlanName.BUSINESS,
  enterprise: PlanName.ENTERPRISE,
};

export function planToProto(plan: Plan): PlanName {
  return PLAN_TO_PROTO[plan];
}

export function planFromProto(plan: PlanName): Plan | undefined {
  return (Object.keys(PLAN_TO_PROTO) as Plan[]).find((name) => PLAN_TO_PROTO[name] === plan);
}

export type Access = "read" | "read_write";

export function accessToProto(access: Access): TokenAccess {
  return access === "read" ? TokenAccess.READ : TokenAccess.READ_WRITE;
}

export function accessFromProto(access: TokenAccess): Access | undefined {
  if (access === TokenAccess.READ) return "read";
  if (access === TokenAccess.READ_WRITE) return "read_write";
  return undefined;
}

export type InviteState = "pending" | "accepted" | "declined" | "canceled" | "expired";

const INVITE_STATUS_TO_PROTO: Record<InviteState, InviteStatus> = {
  pending: InviteStatus.PENDING,
  accepted: InviteStatus.ACCEPTED,
  declined: InviteStatus.DECLINED,
  canceled: InviteStatus.CANCELED,
  expired: InviteStatus.EXPIRED,
};

export function inviteStatusToProto(status: InviteState): InviteStatus {
  return INVITE_STATUS_TO_PROTO[status];
}

export function limitsToProto(limits: PlanLimits): PlanLimitsMessage {
  return create(PlanLimitsSchema, limits);
}

export function limitsFromProto(message: PlanLimitsMessage): PlanLimits {
  return {
    records: message.records,
    apiCallsPerMonth: message.apiCallsPerMonth,
    fileStorageBytes: message.fileStorageBytes,
    transferBytesPerMonth: message.transferBytesPerMonth,
    members: message.members,
    maxFileBytes: message.maxFileBytes,
    changeStreams: message.changeStreams,
    webhooks: message.webhooks,
    forms: message.forms,
  };
}
