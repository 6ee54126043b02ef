import type { IncomingMessage } from "node:http";
import { createRequire } from "node:module";
import type { Readable } from "node:stream";
import { Code, ConnectError, domainError } from "@rowbase/kit";
import type { Context } from "koa";
import { type ValidationCode, ValidationFailed } from "../../errors/validation-failed.js";
import { untilBodyStalls } from "../../http/request-body-timeouts.js";

/**
 * An upload's one multipart part, streamed as it arrives into whatever stores it (the files
 * service's client-streaming UploadFile) in chunks of at most 64 KiB: no file is ever held whole
 * in memory. The sink's input stays open until the whole multipart body has been read and found
 * to hold exactly one part named `file`; only then does it end, which is what makes the service
 * commit. Anything else (another part, a part past the size ceiling, a refused quota, a client
 * gone) abandons the upload instead, so that nothing is stored.
 *
 * Abandoning cannot rely on cancelling the call alone: a client-stream reset (RST_STREAM) reaches
 * a Node.js HTTP/2 server as the end of the request body, indistinguishable from a finished
 * upload unless the handler checks its signal. So an abandoned upload first tells the sink in
 * band (UPLOAD_ABANDONED, which the files sink turns into a message the contract refuses) and
 * waits for the call to fail; only a sink that does not answer in time is cancelled.
 */

/** The largest chunk handed to the sink. */
export const UPLOAD_CHUNK_BYTES = 64 * 1024;

/**
 * What a body may hold besides its one part's bytes: the boundaries and the part's headers
 * (busboy reads at most 16 KiB of them). Bytes before the first boundary or after the last one
 * are dropped by busboy, past any limit of multer's, so without this bound an upload's body
 * could be any size whatever the ceiling.
 */
export const MULTIPART_FRAMING_BYTES = 64 * 1024;

/**
 * The last item of an abandoned upload's chunks: the sink must make its call fail on it (the
 * files sink sends a second header, which UploadFile refuses), so that nothing is stored.
 */
export const UPLOAD_ABANDONED = Symbol("upload abandoned");

/** What the sink gets: the part's file name and its bytes; `signal` cancels its call. */
export interface UploadPart {
  fileName: string;
  /** The bytes; they end normally only for an upload to store. */
  chunks: AsyncIterable<Uint8Array | typeof UPLOAD_ABANDONED>;
  signal: AbortSignal;
}

/** Stores a part, answering once its input ended (or failing). */
export type UploadSink<T> = (part: UploadPart) => Promise<T>;

/** Called around every chunk: `before` may refuse it (a quota), `after` counts what moved. */
export interface ChunkHooks {
  before?(bytes: number): Promise<void>;
  after?(bytes: number): void;
}

export interface ReceiveUploadOptions<T> {
  /** The one part's name (`file`). */
  partName: string;
  /** The absolute ceiling: past it the upload fails mid-stream with 413 `file_too_large`. */
  maxBytes: number;
  sink: UploadSink<T>;
  hooks?: ChunkHooks;
  /**
   * How long the sink may take to answer once its input ended (past it, 503), or to fail once
   * told the upload is abandoned (past it, its call is cancelled).
   */
  answerTimeoutMs: number;
}

/** The part of multer this module uses (it ships no types). */
interface MulterFile {
  fieldname: string;
  originalname: string;
  stream: Readable & { truncated?: boolean };
}

interface StorageEngine {
  _handleFile(
    req: IncomingMessage,
    file: MulterFile,
    callback: (error: Error | null, info?: object) => void,
  ): void;
  _removeFile(
    req: IncomingMessage,
    file: MulterFile,
    callback: (error: Error | null) => void,
  ): void;
}

interface MulterLimits {
  fileSize?: number;
  files?: number;
  fields?: number;
  parts?: number;
  headerPairs?: number;
  fieldNameSize?: number;
}

type KoaMiddleware = (ctx: Context, next: () => Promise<unknown>) => Promise<unknown>;

type KoaMulter = (options: {
  storage: StorageEngine;
  limits: MulterLimits;
  defParamCharset?: string;
  preservePath?: boolean;
  /** Feeds the request to busboy (multer's default: `req.pipe(busboy)`). */
  streamHandler?: (req: IncomingMessage, busboy: NodeJS.WritableStream) => void;
}) => { single(name: string): KoaMiddleware };

const require = createRequire(import.meta.url);
const koaMulter = require("@koa/multer") as KoaMulter;

/** multer's error codes (MulterError.code). */
type MulterCode =
  | "LIMIT_PART_COUNT"
  | "LIMIT_FILE_SIZE"
  | "LIMIT_FILE_COUNT"
  | "LIMIT_FIELD_KEY"
  | "LIMIT_FIELD_VALUE"
  | "LIMIT_FIELD_COUNT"
  | "LIMIT_UNEXPECTED_FILE"
  | "MISSING_FIELD_NAME";

function multerCodeOf(error: unknown): { code: MulterCode; field?: string } | undefined {
  if (!(error instanceof Error) || error.name !== "MulterError") return undefined;
  const { code, field } = error as Error & { code?: unknown; field?: unknown };
  if (typeof code !== "string") return undefined;
  return { code: code as MulterCode, ...(typeof field === "string" ? { field } : {}) };
}

/** 413 `file_too_large`: past the ceiling the gateway enforces (the service has its own). */
export function fileTooLarge(): ConnectError {
  return domainError(Code.InvalidArgument, "file_too_large");
}

/** Splits a chunk into pieces of at most UPLOAD_CHUNK_BYTES, without copying. */
function* pieces(chunk: Uint8Array): Generator<Uint8Array> {
  for (let offset = 0; offset < chunk.byteLength; offset += UPLOAD_CHUNK_BYTES) {
    yield chunk.subarray(offset, Math.min(chunk.byteLength, offset + UPLOAD_CHUNK_BYTES));
  }
}

/**
 * One part on its way into the sink. `received` settles when every byte of the part went to the
 * sink (or the sink failed first); `commit` then ends the sink's input and waits for its answer;
 * `abandon` makes the sink's call fail instead.
 */
class StreamedPart<T> {
  readonly received: Promise<void>;
  private readonly result: Promise<T>;
  private readonly controller = new AbortController();
  private readonly committed = Promise.withResolvers<"commit">();
  private readonly abandoned = Promise.withResolvers<"abandon">();
  /** Resolves when the sink's call ended: its input must end too, or its stream stays open. */
  private readonly ended = Promise.withResolvers<"ended">();
  private settled = false;
  /** Why the upload failed, as the client is to hear it (preferred to the sink's error). */
  private failure: unknown;

  constructor(
    stream: MulterFile["stream"],
    fileName: string,
    sink: UploadSink<T>,
    private readonly hooks: ChunkHooks,
    private readonly answerTimeoutMs: number,
  ) {
    const received = Promise.withResolvers<void>();
    this.received = received.promise;
    this.received.catch(() => {});
    stream.once("limit", () => void this.abandon(fileTooLarge()));
    this.result = sink({
      fileName,
      chunks: this.chunks(stream, received),
      signal: this.controller.signal,
    }).then(
      (value) => {
        this.settle();
        return value;
      },
      (error: unknown) => {
        this.settle();
        throw this.failure ?? error;
      },
    );
    this.result.catch((error: unknown) => received.reject(error));
  }

  private settle(): void {
    this.settled = true;
    this.ended.resolve("ended");
  }

  /**
   * The part's bytes in pieces, each admitted by the hooks first; then, once the part is whole,
   * nothing until the upload is committed (the input ends) or abandoned (UPLOAD_ABANDONED). Once
   * the call ended (the service refused the upload mid-stream), the input just ends: nothing can
   * be stored any more, and an input left open would keep the call's stream open.
   */
  private async *chunks(
    stream: MulterFile["stream"],
    received: PromiseWithResolvers<void>,
  ): AsyncGenerator<Uint8Array | typeof UPLOAD_ABANDONED> {
    // Leaving early must not destroy busboy's stream under it; what is left is drained.
    const iterator = stream.iterator({ destroyOnReturn: false });
    try {
      // Whatever goes wrong here (the part's stream failing as its client goes away) must not
      // end this input by throwing: a failed input is a cancelled call, which may reach the
      // service as a clean end. It ends with UPLOAD_ABANDONED instead.
      try {
        for (;;) {
          const next = await Promise.race([
            iterator.next(),
            this.abandoned.promise,
            this.ended.promise,
          ]);
          if (next === "ended") return;
          if (next === "abandon") break;
          if (next.done) {
            if (stream.truncated) {
              this.failure ??= fileTooLarge();
              break;
            }
            received.resolve();
            const outcome = await Promise.race([
              this.committed.promise,
              this.abandoned.promise,
              this.ended.promise,
            ]);
            if (outcome !== "abandon") return;
            break;
          }
          for (const piece of pieces(next.value as Uint8Array)) {
            try {
              await this.hooks.before?.(piece.byteLength);
            } catch (error) {
              void this.abandon(error);
              break;
            }
            if (this.settled) return;
            if (this.failure !== undefined) break;
            try {
              yield piece;
            } catch {
              // Connect throws the transport's error in here when the call's connection is lost
              // (the service died mid-upload); the call fails with its own, classified error
              // (503), which is the answer: this raw one must not become `failure` (500).
              return;
            }
            this.hooks.after?.(piece.byteLength);
          }
          if (this.failure !== undefined) break;
        }
      } catch (error) {
        void this.abandon(error);
      }
      if (!this.settled) yield UPLOAD_ABANDONED;
    } finally {
      stream.resume();
    }
  }

  /** Ends the sink's input and waits for its answer, at most the answer timeout. */
  async commit(): Promise<T> {
    const timer = setTimeout(() => {
      this.failure ??= new ConnectError("no answer to the upload in time", Code.DeadlineExceeded);
      this.controller.abort(this.failure);
    }, this.answerTimeoutMs);
    try {
      this.committed.resolve("commit");
      return await this.result;
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Makes the sink's call fail so that nothing is stored (see the module's comment), and waits
   * for it; a sink that has not failed within the answer timeout is cancelled. A no-op once the
   * call ended.
   */
  async abandon(reason: unknown = new Error("upload abandoned")): Promise<void> {
    if (this.settled) return;
    this.failure ??= reason;
    this.abandoned.resolve("abandon");
    const timer = setTimeout(() => this.controller.abort(this.failure), this.answerTimeoutMs);
    try {
      await this.result.catch(() => {});
    } finally {
      clearTimeout(timer);
    }
  }
}

/**
 * Reads a multipart/form-data upload of exactly one part named `partName` and streams it into
 * the sink, answering what the sink answered. Refusals: a body that is not multipart, has no
 * such part, another part, or is malformed is the 400 validation shape; a part past `maxBytes`,
 * or a body past it and MULTIPART_FRAMING_BYTES, is 413 `file_too_large`; a body that stalls
 * is 408 `request_timeout` (untilBodyStalls); the sink's own errors pass through.
 */
export async function receiveUpload<T>(ctx: Context, options: ReceiveUploadOptions<T>): Promise<T> {
  if (!ctx.request.is("multipart/form-data")) {
    throw ValidationFailed.of(
      "header",
      "content-type",
      "must be multipart/form-data",
      "invalid_value",
    );
  }
  // Stored as sent: a body labelled compressed would be kept compressed (or fail to parse).
  const encoding = ctx.get("content-encoding").trim().toLowerCase();
  if (encoding !== "" && encoding !== "identity") {
    throw ValidationFailed.of(
      "header",
      "content-encoding",
      "must be identity: uploads are not decoded",
      "invalid_value",
    );
  }
  let part: StreamedPart<T> | undefined;
  const storage: StorageEngine = {
    _handleFile(_req, file, callback) {
      part = new StreamedPart(
        file.stream,
        file.originalname,
        options.sink,
        options.hooks ?? {},
        options.answerTimeoutMs,
      );
      part.received.then(
        () => callback(null, {}),
        (error: unknown) => callback(error instanceof Error ? error : new Error(String(error))),
      );
    },
    _removeFile(_req, _file, callback) {
      (part?.abandon() ?? Promise.resolve()).then(() => callback(null));
    },
  };
  // The body busboy reads is held to the ceiling, framing included (MULTIPART_FRAMING_BYTES).
  // Past it, busboy is fed no more (no part can start after the answer) and the answer does not
  // wait for the rest of the body, which could be endless: it closes the connection instead.
  const bodyMax = options.maxBytes + MULTIPART_FRAMING_BYTES;
  const overflow = Promise.withResolvers<never>();
  let overflowed: ConnectError | undefined;
  const upload = koaMulter({
    streamHandler(req, busboy) {
      let received = 0;
      const count = (chunk: Buffer) => {
        received += chunk.byteLength;
        if (received <= bodyMax) return;
        req.off("data", count);
        req.unpipe(busboy);
        overflowed = fileTooLarge();
        overflow.reject(overflowed);
      };
      req.on("data", count);
      // Once multer stops feeding busboy it has its answer, which stands; a refusal it gives
      // after reading the rest of the body.
      busboy.once("unpipe", () => req.off("data", count));
      req.pipe(busboy);
    },
    storage,
    limits: {
      fileSize: options.maxBytes,
      files: 1,
      fields: 0,
      parts: 1,
      headerPairs: 100,
      fieldNameSize: 200,
    },
    // Browsers send UTF-8 file names without saying so.
    defParamCharset: "utf8",
    // The name as sent: the files service reduces it to a label and never refuses it. busboy's
    // own reduction turns `..` or `dir/` into an empty name, which multer drops as no file.
    preservePath: true,
  }).single(options.partName);
  try {
    await untilBodyStalls(ctx.req, Promise.race([upload(ctx, async () => {}), overflow.promise]));
  } catch (error) {
    await part?.abandon(error);
    throw refusalOf(error, ctx, options.partName);
  }
  if (!part) {
    throw ValidationFailed.of(
      "body",
      options.partName,
      `is required: send one part named ${options.partName} with a filename`,
      "required",
    );
  }
  return part.commit();
}

/** What a failed read of the multipart body answers. */
function refusalOf(error: unknown, ctx: Context, partName: string): unknown {
  const multer = multerCodeOf(error);
  const invalid = (key: string, message: string, code: ValidationCode = "invalid_value") =>
    ValidationFailed.of("body", key, message, code);
  if (multer) {
    switch (multer.code) {
      case "LIMIT_FILE_SIZE":
        return fileTooLarge();
      case "LIMIT_UNEXPECTED_FILE":
        return multer.field === partName
          ? invalid(partName, "must be the only part")
          : invalid(
              multer.field ?? "body",
              `is not expected: send one part named ${partName}`,
              "unknown_key",
            );
      case "LIMIT_PART_COUNT":
      case "LIMIT_FILE_COUNT":
        return invalid(partName, "must be the only part");
      case "LIMIT_FIELD_COUNT":
        return invalid(partName, "must be the only part, and a file (a part with a filename)");
      default:
        return invalid(
          "body",
          `is not valid multipart/form-data: ${(error as Error).message}`,
          "invalid_syntax",
        );
    }
  }
  if (error instanceof ConnectError || error instanceof ValidationFailed) return error;
  // The client went away mid-body: nobody reads the answer; keep it out of the error log.
  if (ctx.req.destroyed && !ctx.req.readableEnded) {
    return invalid("body", "ended before the multipart body did", "invalid_syntax");
  }
  // busboy's parse errors: no boundary, a malformed part header, the body ending mid-part.
  if (
    error instanceof Error &&
    /multipart|boundary|part header|end of (form|file)/i.test(error.message)
  ) {
    return invalid("body", `is not valid multipart/form-data: ${error.message}`, "invalid_syntax");
  }
  return error;
}
