import type { ValidationItem } from "./validation.js";

export const AUDIT_LIMIT_DEFAULT = 50;
export const AUDIT_LIMIT_MAX = 1000;

/** A validated page of the audit log: bounds on `at` (since inclusive, until exclusive). */
export interface AuditQuery {
  limit: number;
  offset: number;
  since?: Date | undefined;
  until?: Date | undefined;
  action?: string | undefined;
}

const ACTION = /^[a-z_]{1,40}\.[a-z_]{1,40}$/;

/**
 * The list parameters of SPEC section 11, or what is wrong with them. A limit of 0 is the
 * unset proto field: the default 50.
 */
export function auditQueryOf(input: {
  limit: number;
  offset: number;
  since?: Date | undefined;
  until?: Date | undefined;
  action: string;
}): AuditQuery | { problems: ValidationItem[] } {
  const problems: ValidationItem[] = [];
  const limit = input.limit === 0 ? AUDIT_LIMIT_DEFAULT : input.limit;
  if (!Number.isInteger(limit) || limit < 1 || limit > AUDIT_LIMIT_MAX) {
    problems.push({ key: "limit", message: `must be 1-${AUDIT_LIMIT_MAX}`, source: "query" });
  }
  if (!Number.isInteger(input.offset) || input.offset < 0) {
    problems.push({ key: "offset", message: "must be 0 or more", source: "query" });
  }
  if (input.action !== "" && !ACTION.test(input.action)) {
    problems.push({
      key: "action",
      message: "must be an action such as record.updated",
      source: "query",
    });
  }
  if (input.since && input.until && input.until.getTime() <= input.since.getTime()) {
    problems.push({ key: "until", message: "must be after since", source: "query" });
  }
  if (problems.length > 0) return { problems };
  return {
    limit,
    offset: input.offset,
    since: input.since,
    until: input.until,
    action: input.action === "" ? undefined : input.action,
  };
}
