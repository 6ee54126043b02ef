/** A signed file link's token: a credential for an hour, in its path. */
const SIGNED_FILE_TOKEN = /^(\/file\/signed\/)[^/]+/i;

/**
 * The request path as logs and traces may keep it: a signed file link's token is replaced, since
 * whoever reads the logs could otherwise fetch the file for as long as the link lives.
 */
export function loggablePath(path: string): string {
  return path.replace(SIGNED_FILE_TOKEN, "$1[redacted]");
}
