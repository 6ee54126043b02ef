import { pino } from "pino";

export type Logger = pino.Logger;

/** Paths whose values never reach a log line. */
const redact = [
  "password",
  "*.password",
  "token",
  "*.token",
  "code",
  "*.code",
  "refresh_token",
  "*.refresh_token",
  "access_token",
  "*.access_token",
  "authorization",
  "*.authorization",
  "headers.authorization",
  "req.headers.authorization",
];

/** JSON logs with the service name on every line and secrets redacted. */
export function createLogger(service: string, level = "info"): Logger {
  return pino({
    name: service,
    level,
    base: { service },
    redact: { paths: redact, censor: "[redacted]" },
  });
}
