/**
 * Options of every router the gateway mounts routes on: a path matches only as written, in its
 * case and without a trailing slash, so `/Organization/list/` is an unknown route (404) rather
 * than a second spelling of a known one.
 */
export const ROUTER_OPTIONS = { sensitive: true, strict: true } as const;

/** Characters with a meaning in a regular expression, escaped where the path has them literally. */
const REGEX_METACHARACTERS = /[.*+?^${}()|[\]\\/]/g;

const PARAMETER = /:(\w+)/g;

/**
 * The regular expression @koa/router compiles for `path` with `ROUTER_OPTIONS` (path-to-regexp
 * v8: case-sensitive, the whole path, no trailing slash), except that each parameter
 * named in `patterns` matches only its pattern. Capture groups stay in the order of the path's
 * parameters, which is how the router names them.
 */
export function pathRegExp(path: string, patterns: Record<string, string>): RegExp {
  if (/[{}*]/.test(path)) throw new Error(`${path}: optional or wildcard parts take no patterns`);
  const names: string[] = [];
  let source = "";
  let end = 0;
  for (const match of path.matchAll(PARAMETER)) {
    const name = match[1] ?? "";
    source += path.slice(end, match.index).replace(REGEX_METACHARACTERS, "\\$&");
    source += `(${patterns[name] ?? "[^\\/]+?"})`;
    names.push(name);
    end = match.index + match[0].length;
  }
  source += path.slice(end).replace(REGEX_METACHARACTERS, "\\$&");
  for (const name of Object.keys(patterns)) {
    if (!names.includes(name)) throw new Error(`${path}: no parameter '${name}' to restrict`);
  }
  return new RegExp(`^(?:${source})$`);
}

/**
 * Narrows a registered route to the paths whose parameters match their patterns. path-to-regexp
 * v8 dropped inline patterns (`/:id(\\d+)`), so the layer keeps the regular expression compiled
 * from its path with the same parameters, in the same order, only stricter. Requests it no
 * longer matches fall through to other routes, then to the 404/405 fallback.
 */
export function restrictParams(
  layer: {
    readonly path: string | RegExp;
    readonly paramNames: { name: string }[];
    regexp: RegExp;
  },
  patterns: Record<string, string>,
): void {
  if (typeof layer.path !== "string") throw new Error("only string paths take patterns");
  const regexp = pathRegExp(layer.path, patterns);
  const names = [...layer.path.matchAll(PARAMETER)].map((match) => match[1]);
  const routerNames = layer.paramNames.map((key) => key.name);
  if (names.join("/") !== routerNames.join("/")) {
    throw new Error(`${layer.path}: the router reads other parameters (${routerNames.join(", ")})`);
  }
  layer.regexp = regexp;
}
