import { Code, type ConnectError, domainError } from "@rowbase/kit";

/** A webhook that does not exist, or one of an organization the caller is not a member of. */
export function webhookNotFound(): ConnectError {
  return domainError(Code.NotFound, "webhook_not_found");
}

export function tableNotFound(): ConnectError {
  return domainError(Code.NotFound, "table_not_found");
}

/** A literal address in the URL that webhooks may not reach (400). */
export function webhookUrlForbidden(): ConnectError {
  return domainError(Code.InvalidArgument, "webhook_url_forbidden");
}

/** Past the plan's `webhooks` (403). */
export function webhookLimitExceeded(): ConnectError {
  return domainError(Code.ResourceExhausted, "webhook_limit_exceeded");
}

/** A delivery that does not exist, or one of another organization's webhook. */
export function deliveryNotFound(): ConnectError {
  return domainError(Code.NotFound, "delivery_not_found");
}
