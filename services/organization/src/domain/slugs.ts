/** 3-48 characters of a-z, 0-9 and '-'. */
export const SLUG_PATTERN = /^[a-z0-9-]{3,48}$/;
export const SLUG_MAX = 48;

export function isSlug(value: string): boolean {
  return SLUG_PATTERN.test(value);
}

/**
 * A slug from an organization's name: accents dropped, lower case, every run of other
 * characters one '-', no '-' at either end. Too short a result is padded so it stays readable
 * ("a" -> "a-org"); a name with nothing usable gives "organization".
 */
export function slugFromName(name: string): string {
  const base = name
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .slice(0, SLUG_MAX)
    .replace(/^-+|-+$/g, "");
  if (base.length === 0) return "organization";
  return base.length < 3 ? `${base}-org` : base;
}

/** The n-th candidate for a taken slug: `acme`, `acme-2`, `acme-3`, ... within 48 characters. */
export function slugCandidate(base: string, n: number): string {
  if (n <= 1) return base;
  const suffix = `-${n}`;
  const head = base.slice(0, SLUG_MAX - suffix.length).replace(/-+$/, "");
  return `${head}${suffix}`;
}
