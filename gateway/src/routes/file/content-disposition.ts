import { replaceControlCharacters } from "@rowbase/kit/field-types";

/** How a served file is presented (the files service decides; active content is an attachment). */
export type DispositionKind = "inline" | "attachment";

/** RFC 8187 attr-char: what stays unencoded in `filename*`. */
const ATTR_CHAR = /[A-Za-z0-9!#$&+\-.^_`|~]/;

/**
 * The name as it may appear at all: no control or bidi characters, no path separators (a name
 * never names a place to save to), never empty, `.` or `..`.
 */
function cleanName(fileName: string): string {
  const name = replaceControlCharacters(fileName.toWellFormed()).replace(/[/\\]/g, "_").trim();
  return name === "" || name === "." || name === ".." ? "file" : name;
}

/**
 * The plain `filename` for old clients: printable ASCII without `"`, `\`, `%` (which some
 * decode) and `;` (which naive parsers split on), each replaced by `_`.
 */
function asciiFallback(name: string): string {
  return Array.from(name, (char) =>
    /^[\x20-\x7e]$/.test(char) && !/["\\%;]/.test(char) ? char : "_",
  )
    .join("")
    .trim();
}

/** RFC 8187 percent-encoding of the UTF-8 bytes of everything but attr-chars. */
function extValue(name: string): string {
  let out = "";
  for (const char of name) {
    if (ATTR_CHAR.test(char)) {
      out += char;
    } else {
      for (const byte of Buffer.from(char, "utf8")) {
        out += `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
      }
    }
  }
  return `UTF-8''${out}`;
}

/**
 * `Content-Disposition` of a served file (RFC 6266): the kind, a quoted ASCII `filename` and the
 * exact name in `filename*` (RFC 8187), which clients that know it prefer. Nothing in the stored
 * name can end the header, add a parameter or make the browser save outside its folder.
 */
export function contentDisposition(kind: DispositionKind, fileName: string): string {
  const name = cleanName(fileName);
  const fallback = asciiFallback(name) || "file";
  return `${kind}; filename="${fallback}"; filename*=${extValue(name)}`;
}
