export { type WebhooksConfig, webhooksEnv } from "./config.js";
export {
  ANSWER_READ_MAX_BYTES,
  type AttemptOutcome,
  attemptDelivery,
  USER_AGENT,
} from "./delivery/attempt.js";
export { AllowedTargets, addressClass, isPublicAddress } from "./domain/address-policy.js";
export {
  DEFAULT_RETRY_SCHEDULE,
  parseRetrySchedule,
  retryDelayMs,
} from "./domain/retry-schedule.js";
export { isSecret, newSecret, signedHeaders } from "./domain/signature.js";
export { WEBHOOK_URL_MAX_LENGTH, webhookUrlProblem } from "./domain/webhook-url.js";
export { migrateWebhooks, type RunningWebhooks, SCHEMA, startWebhooks } from "./service.js";
