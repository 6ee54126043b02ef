import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import type { LookupFunction } from "node:net";
import ipaddr from "ipaddr.js";
import { Agent, request } from "undici";
import type { AllowedTargets } from "../domain/address-policy.js";

/** The most of an answer an attempt reads: the rest is not needed to judge it. */
export const ANSWER_READ_MAX_BYTES = 64 * 1024;

export const USER_AGENT = "Rowbase-Webhooks/1";

/** What one attempt came to: the answer's status, or why there was none. */
export interface AttemptOutcome {
  /** Absent when no answer came. */
  status?: number;
  /** `address_forbidden`, `timeout`, `connection_failed` or `invalid_url`; absent on an answer. */
  error?: string;
  durationMs: number;
  /** The start of the answer's body, at most ANSWER_READ_MAX_BYTES. */
  body: Buffer;
}

/** The target's address is not one a webhook may reach (see address-policy.ts). */
export class AddressForbidden extends Error {
  readonly code = "ADDRESS_FORBIDDEN";
}

/**
 * A DNS lookup that answers only addresses the policy permits: the connection then goes to an
 * address checked at connect time, so a name that resolves to a public address when the webhook
 * is saved and to a private one later (DNS rebinding) is refused.
 */
function checkedLookup(allowed: AllowedTargets, port: number): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses: LookupAddress[]) => {
      if (error) {
        (callback as (error: Error) => void)(error);
        return;
      }
      const permitted = addresses.filter(({ address }) =>
        allowed.permits({ hostname, port, address }),
      );
      if (permitted.length === 0) {
        (callback as (error: Error) => void)(
          new AddressForbidden(`${hostname} resolves to no address a webhook may reach`),
        );
        return;
      }
      if (options.all) {
        (callback as (error: null, addresses: LookupAddress[]) => void)(null, permitted);
      } else {
        const [first] = permitted as [LookupAddress];
        (callback as (error: null, address: string, family: number) => void)(
          null,
          first.address,
          first.family,
        );
      }
    });
  };
}

function portOf(url: URL): number {
  if (url.port !== "") return Number(url.port);
  return url.protocol === "https:" ? 443 : 80;
}

function causes(error: unknown): unknown[] {
  const chain: unknown[] = [];
  for (let at = error; at !== undefined && chain.length < 5; ) {
    chain.push(at);
    at = (at as { cause?: unknown }).cause;
  }
  return chain;
}

/**
 * POSTs one signed body to a webhook's URL, following no redirect (a 3xx is a failed attempt
 * like any other answer that is not 2xx), waiting at most `timeoutMs` for the whole attempt and
 * reading at most ANSWER_READ_MAX_BYTES of the answer. The address is checked on the resolved
 * IP the connection uses; a literal IP in the URL is checked before connecting.
 */
export async function attemptDelivery(options: {
  url: string;
  body: string;
  headers: Record<string, string>;
  allowed: AllowedTargets;
  timeoutMs: number;
}): Promise<AttemptOutcome> {
  const started = performance.now();
  const done = (outcome: Omit<AttemptOutcome, "durationMs" | "body"> & { body?: Buffer }) => ({
    body: Buffer.alloc(0),
    ...outcome,
    durationMs: Math.round(performance.now() - started),
  });
  let url: URL;
  try {
    url = new URL(options.url);
  } catch {
    return done({ error: "invalid_url" });
  }
  const port = portOf(url);
  const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
  if (ipaddr.isValid(host) && !options.allowed.permits({ hostname: host, port, address: host })) {
    return done({ error: "address_forbidden" });
  }
  const agent = new Agent({ connect: { lookup: checkedLookup(options.allowed, port) } });
  try {
    const response = await request(url, {
      method: "POST",
      headers: {
        ...options.headers,
        "content-type": "application/json",
        "user-agent": USER_AGENT,
      },
      body: options.body,
      dispatcher: agent,
      signal: AbortSignal.timeout(options.timeoutMs),
    });
    const chunks: Buffer[] = [];
    let read = 0;
    for await (const chunk of response.body) {
      const piece = chunk as Buffer;
      chunks.push(piece.subarray(0, ANSWER_READ_MAX_BYTES - read));
      read += piece.length;
      if (read >= ANSWER_READ_MAX_BYTES) break;
    }
    response.body.destroy();
    return done({ status: response.statusCode, body: Buffer.concat(chunks) });
  } catch (error) {
    const chain = causes(error);
    if (chain.some((cause) => cause instanceof AddressForbidden)) {
      return done({ error: "address_forbidden" });
    }
    if (chain.some((cause) => (cause as Error)?.name === "TimeoutError")) {
      return done({ error: "timeout" });
    }
    return done({ error: "connection_failed" });
  } finally {
    await agent.destroy().catch(() => {});
  }
}
