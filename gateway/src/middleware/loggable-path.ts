/** A signed file link's token: a credential for an hour, in its path. */
const SIGNED_FILE_TOKEN = /^(\/file\/signed\/)[^/]+/i;

/** A public form's key: kept to its first six characters, enough to tell forms apart. */
const FORM_KEY = /^(\/forms\/[^/]{0,6})[^/]*/i;

/**
 * The request path as logs and traces may keep it: a signed file link's token is replaced, since
 * whoever reads the logs could otherwise fetch the file for as long as the link lives; a public
 * form's key is shortened, so that logs do not hand out the addresses of every form.
 */
export function loggablePath(path: string): string {
  return path.replace(SIGNED_FILE_TOKEN, "$1[redacted]").replace(FORM_KEY, "$1…");
}
