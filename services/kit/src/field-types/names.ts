/**
 * The one rule by which table names (within a database) and field names (within a table) are
 * the same name regardless of case: equal after NFC normalisation and
 * Unicode's full lower-case mapping (JavaScript's toLowerCase, which depends on no locale), and
 * NFC again, since lower-casing may leave marks out of canonical order. Catalog stores this key
 * beside each name and the database keeps it unique, so what catalog refuses and what records
 * resolves a reference to never depend on the database's collation: PostgreSQL's lower() folds
 * "İ" to "i" under C.UTF-8, only ASCII under C, and follows glibc's or ICU's tables otherwise.
 * Under this rule "İ" and "i̇" (i and U+0307) are one name, "İ" and "i" two; "é" and "e" with
 * U+0301 are one name.
 */
export function foldName(name: string): string {
  return name.normalize("NFC").toLowerCase().normalize("NFC");
}

/** Characters as people count them: Unicode code points, not UTF-16 units. */
export function codePointLength(value: string): number {
  let surrogatePairs = 0;
  for (let i = 0; i < value.length; i++) {
    const unit = value.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff) surrogatePairs++;
  }
  return value.length - surrogatePairs;
}

/**
 * Any character but those that show nothing on their own: white space, format characters (zero-width space
 * and joiners, U+2060, U+FEFF, soft hyphen, bidirectional marks) and the rest of Unicode's
 * default-ignorable code points (variation selectors, Hangul fillers, tags).
 */
const VISIBLE = /[^\p{White_Space}\p{Cf}\p{Default_Ignorable_Code_Point}]/u;

/**
 * Whether a name shows anything: a name made only of invisible characters would pass a length
 * check yet read as empty in every list, and could not be told from another such name.
 */
function hasVisibleCharacter(name: string): boolean {
  return VISIBLE.test(name);
}

/**
 * C0 and C1 control characters (NUL, line breaks, escapes) and the bidirectional controls
 * (U+202E and its kin, which make "invoice\u202Egnp.exe" read as "invoiceexe.png"): nothing a
 * name shown to people may hold.
 */
const CONTROL_CHARACTERS = "[\\p{Cc}\\p{Bidi_Control}]";
const CONTROL = new RegExp(CONTROL_CHARACTERS, "u");
const EVERY_CONTROL = new RegExp(CONTROL_CHARACTERS, "gu");

/** `text` with each character that `nameProblem` refuses as a control replaced. */
export function replaceControlCharacters(text: string, replacement = ""): string {
  return text.replace(EVERY_CONTROL, replacement);
}

/** The longest name of an organization, API token, user, database, table, field or choice. */
export const NAME_MAX_LENGTH = 100;

/**
 * The rule for every name people give something (databases, tables and fields, and the same
 * for organizations, API tokens, users and select choices): 1-100 characters (code points, as the
 * tables' constraints count them), no control characters, at least one that shows, valid
 * Unicode (an unpaired surrogate would be stored as U+FFFD, not as sent). `name` is as it will
 * be stored, so already trimmed. Returns what is wrong with it, or undefined.
 */
export function nameProblem(name: string, maxLength = NAME_MAX_LENGTH): string | undefined {
  // First: a broken string has no length to speak of (`codePointLength` counts a lone high
  // surrogate as half a character).
  if (!name.isWellFormed()) return "must be valid Unicode";
  const length = codePointLength(name);
  if (length < 1 || length > maxLength) return `must be 1-${maxLength} characters`;
  if (CONTROL.test(name)) return "must not contain control characters";
  if (!hasVisibleCharacter(name)) return "must contain a visible character";
  return undefined;
}

/** The longest file name, in characters: what file systems and Content-Disposition take. */
export const FILE_NAME_MAX_LENGTH = 255;

/**
 * The rule for a file's name: a name as `nameProblem` has it, of up to 255
 * characters, without `/` or `\` and other than `.` and `..`. The name is only a label (storage
 * keys are random) but it ends up in Content-Disposition headers and in files people save, so
 * path-like names are refused rather than repaired. `name` is already trimmed.
 */
export function fileNameProblem(name: string): string | undefined {
  const problem = nameProblem(name, FILE_NAME_MAX_LENGTH);
  if (problem) return problem;
  if (name.includes("/") || name.includes("\\")) return "must not contain '/' or '\\'";
  if (name === "." || name === "..") return "must not be '.' or '..'";
  return undefined;
}
