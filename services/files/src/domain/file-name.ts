/** The longest file name, in characters (code points). */
export const FILE_NAME_MAX = 255;

/**
 * Control characters (C0, DEL, C1: NUL and line breaks among them) and the bidirectional
 * formatting characters that make `invoice<RLO>fdp.exe` display as `invoiceexe.pdf`.
 */
const FORBIDDEN = /[\p{Cc}\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/u;
const FORBIDDEN_ALL = /[\p{Cc}\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/gu;

/**
 * A file name as a rename gives it (SPEC section 7): trimmed, 1-255 characters, no `/`, `\`,
 * control or bidirectional formatting characters, and not `.` or `..`. The name is only ever a
 * label (storage keys are random), but it ends up in Content-Disposition headers and in files
 * users save, so path-like names are refused rather than repaired. Returns the name or the
 * problem.
 */
export function checkFileName(raw: string): { name: string } | { problem: string } {
  const name = raw.trim();
  const length = [...name].length;
  if (length < 1 || length > FILE_NAME_MAX) {
    return { problem: `must be 1-${FILE_NAME_MAX} characters` };
  }
  if (name.includes("/") || name.includes("\\")) {
    return { problem: "must not contain '/' or '\\'" };
  }
  if (FORBIDDEN.test(name)) return { problem: "must not contain control characters" };
  if (name === "." || name === "..") return { problem: "must not be '.' or '..'" };
  return { name };
}

/**
 * The name to store for an uploaded file, from whatever the client's multipart part said: the
 * last segment of a path (browsers on old systems send `C:\fakepath\x.png`), without control
 * characters, trimmed, and shortened to 255 characters keeping the extension. An upload is never
 * refused for its name; a name with nothing left becomes `file`.
 */
export function uploadFileName(raw: string): string {
  const segment = raw.split(/[/\\]/).at(-1) ?? "";
  const cleaned = segment.replace(FORBIDDEN_ALL, "").trim();
  if (cleaned === "" || cleaned === "." || cleaned === "..") return "file";
  const chars = [...cleaned];
  if (chars.length <= FILE_NAME_MAX) return cleaned;
  const dot = cleaned.lastIndexOf(".");
  const extension = dot > 0 ? [...cleaned.slice(dot)] : [];
  if (extension.length > 0 && extension.length <= 16) {
    const stem = chars
      .slice(0, FILE_NAME_MAX - extension.length)
      .join("")
      .trimEnd();
    return stem + extension.join("");
  }
  return chars.slice(0, FILE_NAME_MAX).join("").trimEnd();
}
