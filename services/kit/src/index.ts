export * from "./audit-changes.js";
export * from "./authorization.js";
export * from "./bus.js";
export * from "./cache.js";
export * from "./change-json.js";
export * from "./change-set.js";
export * from "./config.js";
export * from "./consume-once.js";
export { redeliveryDelayMs } from "./consumer-loop.js";
export * from "./create-bus.js";
export * from "./db.js";
export {
  DEAD_LETTER_HEADERS,
  type DeadLetter,
  deadLetterSubject,
  undeliverable,
} from "./dead-letters.js";
export * from "./errors.js";
export * from "./events.js";
export * from "./free-port.js";
export * from "./grpc-client.js";
export * from "./grpc-server.js";
export * from "./list-bounds.js";
export * from "./local-cache.js";
export * from "./logger.js";
export * from "./membership-lookup.js";
export * from "./memory-bus.js";
export * from "./metrics.js";
export * from "./nats-bus.js";
export * from "./observability.js";
export * from "./outbox.js";
export * from "./plain-object.js";
export * from "./plan-cache.js";
export * from "./principal.js";
export * from "./rpc-observability.js";
export * from "./schema-change-deadline.js";
export * from "./secrets.js";
export * from "./service-main.js";
export * from "./sql.js";
export * from "./table-schema-cache.js";
export * from "./tracing.js";
export * from "./unreachable.js";
