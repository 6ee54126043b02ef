/**
 * The one rule by which table names (within a database) and field names (within a table) are
 * the same name "regardless of case" (SPEC section 6): equal after NFC normalisation and
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

/**
 * Any character but those that show nothing on their own: white space, format characters (zero-width space
 * and joiners, U+2060, U+FEFF, soft hyphen, bidirectional marks) and the rest of Unicode's
 * default-ignorable code points (variation selectors, Hangul fillers, tags).
 */
const VISIBLE = /[^\p{White_Space}\p{Cf}\p{Default_Ignorable_Code_Point}]/u;

/**
 * Whether a name shows anything: a name made only of invisible characters would pass a length
 * check yet read as empty in every list, and could not be told from another such name. Every
 * check of a name (organization, API token, database, table, field, choice, user) asks this.
 */
export function hasVisibleCharacter(name: string): boolean {
  return VISIBLE.test(name);
}
