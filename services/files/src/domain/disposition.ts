/**
 * Types a browser shows without running anything: images (not SVG, which is a document with
 * scripts), audio, video, plain text and PDF. Everything else, HTML, SVG, XML, JavaScript,
 * Flash and unknown bytes included, is served as an attachment, so that a file uploaded to one
 * organization can never run as a page of the API's origin.
 */
function rendersInert(contentType: string): boolean {
  const mime = contentType.split(";")[0]!.trim().toLowerCase();
  if (mime.endsWith("+xml") || mime.includes("xml")) return false;
  if (mime.startsWith("image/") || mime.startsWith("audio/") || mime.startsWith("video/")) {
    return true;
  }
  return mime === "text/plain" || mime === "application/pdf";
}

export type Disposition = "inline" | "attachment";

/** How a file is presented: attachment for active content or when a download was asked for. */
export function dispositionFor(contentType: string, download = false): Disposition {
  return !download && rendersInert(contentType) ? "inline" : "attachment";
}
