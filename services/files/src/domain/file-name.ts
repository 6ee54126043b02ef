import {
  FILE_NAME_MAX_LENGTH,
  fileNameProblem,
  replaceControlCharacters,
} from "@rowbase/kit/field-types";

/** A file name as a rename gives it, trimmed, by the rule for file names; or the problem. */
export function checkFileName(raw: string): { name: string } | { problem: string } {
  const name = raw.trim();
  const problem = fileNameProblem(name);
  return problem ? { problem } : { name };
}

/**
 * The name to store for an uploaded file, from whatever the client's multipart part said: the
 * last segment of a path (browsers on old systems send `C:\fakepath\x.png`), without control
 * characters, trimmed, and shortened to 255 characters keeping the extension. An upload is never
 * refused for its name: one that the rule for file names still refuses after this (nothing left,
 * `.`, `..`, only invisible characters) becomes `file`.
 */
export function uploadFileName(raw: string): string {
  const segment = raw.split(/[/\\]/).at(-1) ?? "";
  const name = shortened(replaceControlCharacters(segment).trim());
  return fileNameProblem(name) ? "file" : name;
}

/** At most 255 characters, cut before an extension of up to 16 so that it stays. */
function shortened(name: string): string {
  const chars = [...name];
  if (chars.length <= FILE_NAME_MAX_LENGTH) return name;
  const dot = name.lastIndexOf(".");
  const extension = dot > 0 ? [...name.slice(dot)] : [];
  if (extension.length > 0 && extension.length <= 16) {
    const stem = chars
      .slice(0, FILE_NAME_MAX_LENGTH - extension.length)
      .join("")
      .trimEnd();
    return stem + extension.join("");
  }
  return chars.slice(0, FILE_NAME_MAX_LENGTH).join("").trimEnd();
}
