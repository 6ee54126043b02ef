import ipaddr from "ipaddr.js";
import type { AllowedTargets } from "./address-policy.js";

/** The longest URL a webhook takes. */
export const WEBHOOK_URL_MAX_LENGTH = 2048;

/**
 * Why a webhook's URL is refused, or undefined when it is taken: `invalid` (not an absolute
 * http(s) URL without credentials, of at most 2,048 characters) or `forbidden` (a literal
 * address webhooks may not reach: the 400 `webhook_url_forbidden`). A name is checked when each
 * attempt connects, on the address it resolves to then.
 */
export function webhookUrlProblem(
  text: string,
  allowed: AllowedTargets,
): { kind: "invalid" | "forbidden"; message: string } | undefined {
  if (text.length > WEBHOOK_URL_MAX_LENGTH) {
    return { kind: "invalid", message: `must be at most ${WEBHOOK_URL_MAX_LENGTH} characters` };
  }
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return { kind: "invalid", message: "must be an absolute URL" };
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    return { kind: "invalid", message: "must be an https or http URL" };
  }
  if (url.username !== "" || url.password !== "") {
    return { kind: "invalid", message: "must not hold credentials" };
  }
  const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
  const port = url.port === "" ? (url.protocol === "https:" ? 443 : 80) : Number(url.port);
  if (ipaddr.isValid(host) && !allowed.permits({ hostname: host, port, address: host })) {
    return { kind: "forbidden", message: "is an address webhooks may not reach" };
  }
  return undefined;
}
