import { Readable } from "node:stream";
import { Code, ConnectError, errorInfoOf } from "@rowbase/kit";
import {
  ContentDisposition,
  type FileInfo,
  type FileServeHeader,
} from "@rowbase/proto/rowbase/files/v1/files_pb";
import type { GatewayContext } from "../../gateway-context.js";
import { contentRangeOf, parseRangeHeader, type RequestedRange } from "./byte-range.js";
import { contentDisposition, type DispositionKind } from "./content-disposition.js";

/**
 * Answers a file from the files service's server stream (ServeFile, ServeSignedFile): the first
 * message's metadata becomes the status and headers, the chunks that follow the body, passed on
 * as they arrive with backpressure (never a whole file in memory). Conditional requests
 * (`If-None-Match` 304, `If-Range`) are decided from the metadata before a byte moves; the
 * bytes that go out are metered against the organization's monthly transfer.
 */

/** One message of ServeFileResponse or ServeSignedFileResponse. */
export interface ServeMessage {
  payload:
    | { case: "header"; value: FileServeHeader }
    | { case: "chunk"; value: Uint8Array }
    | { case: undefined; value?: undefined };
}

/** Opens the stream of the file, whole or one range; `signal` cancels the call. */
export type OpenServe = (
  range: RequestedRange | undefined,
  signal: AbortSignal,
) => AsyncIterable<ServeMessage>;

/** The transfer of the bytes (see TransferMeter). */
export interface ServeMeter {
  admit(bytes: number): Promise<void>;
  count(bytes: number): void;
  settle(): Promise<void>;
  cancel(): Promise<void>;
}

export interface SendFileOptions {
  open: OpenServe;
  /** The meter of the transfer, charged to the organization that owns the file. */
  meter(organizationId: bigint): Promise<ServeMeter>;
  /** How long the service may take to send the metadata; past it, 503. */
  headerTimeoutMs: number;
}

/** What every answer that carries a file's bytes or metadata says about their handling. */
export const FILE_SECURITY_HEADERS = {
  "X-Content-Type-Options": "nosniff",
  "Content-Security-Policy": "default-src 'none'; sandbox",
  // Authorized (or signed) content: only the client may keep it, and must revalidate.
  "Cache-Control": "private, no-cache",
} as const;

const MEDIA_TYPE =
  /^[A-Za-z0-9!#$&^_.+-]+\/[A-Za-z0-9!#$&^_.+-]+( *; *[A-Za-z0-9!#$&^_.+-]+=[A-Za-z0-9!#$&^_.+-]+)*$/;

/** The stored content type when it is a well-formed media type, else opaque bytes. */
function contentTypeOf(file: FileInfo): string {
  return MEDIA_TYPE.test(file.contentType) ? file.contentType : "application/octet-stream";
}

/** A strong ETag: the SHA-256 of the bytes, which a rename does not change. */
export function etagOf(file: FileInfo): string | undefined {
  return /^[0-9a-f]{64}$/.test(file.sha256) ? `"${file.sha256}"` : undefined;
}

/** `If-None-Match` (weak comparison, RFC 9110 13.1.2): does the client have these bytes? */
export function ifNoneMatchHits(header: string | undefined, etag: string | undefined): boolean {
  if (!header || !etag) return false;
  if (header.trim() === "*") return true;
  const weakless = (tag: string) => (tag.startsWith("W/") ? tag.slice(2) : tag);
  return header.split(",").some((tag) => weakless(tag.trim()) === etag);
}

/**
 * `If-Range` (RFC 9110 13.1.5): the range holds only for the same bytes, by strong comparison
 * of the ETag. A date cannot be checked (no Last-Modified is sent), so it fails: whole file.
 */
export function ifRangeHolds(header: string | undefined, etag: string | undefined): boolean {
  if (header === undefined) return true;
  return etag !== undefined && header.trim() === etag;
}

function dispositionOf(header: FileServeHeader): DispositionKind {
  return header.disposition === ContentDisposition.INLINE ? "inline" : "attachment";
}

interface OpenedStream {
  header: FileServeHeader;
  file: FileInfo;
  iterator: AsyncIterator<ServeMessage>;
  cancel(): void;
}

async function openStream(
  options: SendFileOptions,
  range: RequestedRange | undefined,
): Promise<OpenedStream> {
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, options.headerTimeoutMs);
  const iterator = options.open(range, controller.signal)[Symbol.asyncIterator]();
  let first: IteratorResult<ServeMessage>;
  try {
    first = await iterator.next();
  } catch (error) {
    if (timedOut) throw new ConnectError("no file metadata in time", Code.DeadlineExceeded);
    throw error;
  } finally {
    clearTimeout(timer);
  }
  const header = first.done ? undefined : first.value.payload;
  if (header?.case !== "header" || !header.value.file) {
    controller.abort();
    throw new Error("the files service's stream did not start with the file's metadata");
  }
  return {
    header: header.value,
    file: header.value.file,
    iterator,
    cancel: () => controller.abort(),
  };
}

/**
 * Answers the file (or one range of it) with its stored content type, length, ETag,
 * disposition and the security headers. Errors before the first byte (the service's 404, 416,
 * a refused transfer) are thrown to the error middleware; after it, the connection is cut.
 */
export async function sendFile(ctx: GatewayContext, options: SendFileOptions): Promise<void> {
  const requested = parseRangeHeader(ctx.get("range") || undefined);
  const ifNoneMatch = ctx.get("if-none-match") || undefined;
  const ifRange = ctx.get("if-range") || undefined;
  let opened = await openStream(options, requested).catch(async (error: unknown) => {
    // The preconditions come before Range (RFC 9110 13.2.2): a range past the end of the file
    // is 416 only if neither a matching If-None-Match (304) nor a failing If-Range (the whole
    // file) decides otherwise, which needs the file's metadata.
    const preconditions = ifNoneMatch !== undefined || ifRange !== undefined;
    if (!preconditions || errorInfoOf(error)?.reason !== "range_not_satisfiable") throw error;
    const whole = await openStream(options, undefined);
    const etag = etagOf(whole.file);
    if ((etag && ifNoneMatchHits(ifNoneMatch, etag)) || !ifRangeHolds(ifRange, etag)) return whole;
    whole.cancel();
    throw error;
  });
  const current = etagOf(opened.file);
  if (current && ifNoneMatchHits(ifNoneMatch, current)) {
    opened.cancel();
    ctx.status = 304;
    ctx.set({ ...FILE_SECURITY_HEADERS, ETag: current });
    return;
  }
  if (opened.header.range && !ifRangeHolds(ifRange, current)) {
    opened.cancel();
    opened = await openStream(options, undefined);
  }

  const { header, file } = opened;
  const range = header.range;
  const length = range ? range.last - range.first + 1n : file.size;
  if (length < 0n) {
    opened.cancel();
    throw new Error("the files service announced a negative length");
  }
  const headers: Record<string, string> = {
    "Content-Type": contentTypeOf(file),
    "Content-Length": length.toString(),
    "Accept-Ranges": "bytes",
    "Content-Disposition": contentDisposition(dispositionOf(header), file.fileName),
    ...FILE_SECURITY_HEADERS,
  };
  const etag = etagOf(file);
  if (etag) headers.ETag = etag;
  if (range) headers["Content-Range"] = contentRangeOf(range.first, range.last, file.size);

  if (ctx.method === "HEAD") {
    // Nothing moves: no transfer to count.
    opened.cancel();
    ctx.status = range ? 206 : 200;
    ctx.set(headers);
    return;
  }

  let meter: ServeMeter | undefined;
  try {
    meter = await options.meter(header.organizationId);
    await meter.admit(Number(length));
  } catch (error) {
    opened.cancel();
    await meter?.cancel();
    throw error;
  }
  ctx.status = range ? 206 : 200;
  ctx.body = Readable.from(bytesOf(ctx, opened, meter, length), { objectMode: false });
  // After the body: Koa types a stream body as opaque bytes unless told otherwise.
  ctx.set(headers);
}

/**
 * The chunks after the metadata, exactly `expected` bytes of them, metered as they go. The
 * response ends with its last byte: the meter is settled before that byte goes out, and the end
 * of the service's stream is not waited for. A client that closes as soon as it has the bytes
 * its Content-Length announced (curl, most scripts) must find nothing left to wait for, or every
 * such download would end in a premature close. A stream that fails, ends short or runs past
 * the announced length after the headers went out can only end in a cut connection (the
 * client sees a short body, never a wrong one).
 */
async function* bytesOf(
  ctx: GatewayContext,
  opened: OpenedStream,
  meter: ServeMeter,
  expected: bigint,
): AsyncGenerator<Buffer> {
  let sent = 0n;
  try {
    while (sent < expected) {
      const next = await opened.iterator.next();
      if (next.done) throw new Error("the files service sent fewer bytes than it announced");
      if (next.value.payload.case !== "chunk") continue;
      const chunk = next.value.payload.value;
      sent += BigInt(chunk.byteLength);
      if (sent > expected) throw new Error("the files service sent more bytes than it announced");
      const bytes = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
      if (sent === expected) {
        meter.count(chunk.byteLength);
        await meter.settle();
        yield bytes;
      } else {
        yield bytes;
        meter.count(chunk.byteLength);
      }
    }
  } catch (error) {
    ctx.res.destroy();
    throw error;
  } finally {
    // Whatever the stream still had to say (its end) is of no use to the client now.
    opened.cancel();
    await meter.settle();
  }
}
