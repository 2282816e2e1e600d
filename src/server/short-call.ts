// What the short call paths share (unary.ts, server-stream.ts): the entry
// that takes a request or hands it over and reads its one message
// (shortEntry), the request's headers both ways, a call's signal without
// connect-es's per-call abort, the HandlerContext that connect-es would build
// for the call, and gRPC's trailers.
//
// The short paths reimplement part of connect-es's handler pipeline for
// speed; this is the one list of what they keep of it, and how. Each item is
// compared, call for call and byte for byte, with connect-es's own pipeline
// (a server started with `shortPaths: false`) in
// test/short-path-parity.test.ts, over Connect JSON, Connect binary, gRPC and
// gRPC-web: a connect-es upgrade that changes its pipeline fails that test.
//
// - Which calls: a POST to a unary or server-streaming method of a service
//   registered without options of its own, with the content type named
//   exactly (application/grpc or application/grpc+proto over HTTP/2;
//   application/proto, application/json[; charset=utf-8]; for streams
//   application/connect+proto, application/connect+json[; charset=utf-8]),
//   no request encoding, and a deadline header that parses. Everything else
//   (gRPC-web, gRPC with JSON, GET, other spellings, compressed requests,
//   client and bidi streams, requireConnectProtocolHeader) goes to
//   connect-es with whatever bytes were read, and it negotiates the content
//   type (415 when no protocol takes it) as it does for any call.
// - Unknown methods: the adapter routes by path before any short path, so a
//   path no service serves gets the fallback (404) either way; a method
//   declared but not implemented runs connect-es's own stub (UNIMPLEMENTED).
// - Read limit: readMaxBytes (plus the frame header where the message is
//   framed). A declared length past it is handed over unread; a body found
//   past it mid-read is handed over with what was read, and connect-es reads
//   on and refuses it (RESOURCE_EXHAUSTED, typed MESSAGE_TOO_LARGE by
//   error-shape.ts). A body that is not exactly one uncompressed frame is
//   handed over too.
// - Parsing and writing: connect-es's serializers (createMethodSerializationLookup),
//   so writeMaxBytes holds; a reply of bytes already encoded (knownEncoding)
//   is held to it by withinWriteLimit, in connect-es's words. A request that
//   does not parse is shaped by shapeError as request-errors.ts shapes it on
//   connect-es's path (INVALID_ARGUMENT, MESSAGE_FORMAT_INVALID).
// - Interceptors: the router's, first outermost, on a request shaped as
//   connect-es makes it (invoke-unary.ts; its signal an accessor that a copy
//   such as { ...req } keeps); a request an interceptor replaced is what the
//   handler sees (contextFor); the response's headers (and a unary
//   response's trailers, or a stream's after its last message) are copied
//   back as connect-es copies them (copyHeaders). Its HandlerContext
//   (ShortCallContext) has the same fields, the signal made when first read.
// - Deadlines: grpc-timeout and connect-timeout-ms, parsed by connect-es's
//   parseTimeout against maxTimeoutMs (deadline.ts first clamps what a timer
//   cannot hold, on both paths). The deadline aborts the call's signal with
//   connect-es's error (DEADLINE_EXCEEDED, "the operation timed out"), at once
//   when already passed. A unary method decides what it answers then (a
//   waited Send answers with the task as it stands); a stream its method ends
//   after the deadline ends as DEADLINE_EXCEEDED (on connect-es's path the
//   error-shaping interceptor does the same).
// - Compression: any compressed request goes to connect-es (which also
//   refuses an encoding it lacks, UNIMPLEMENTED). A reply is negotiated from
//   grpc-accept-encoding, accept-encoding or connect-accept-encoding over
//   the router's acceptCompression (gzip, br) by compressionNegotiate, and a
//   message of compressMinBytes (32 KiB) or more is compressed; gRPC and
//   Connect streams name the negotiated encoding in their headers whatever
//   the size, Connect unary only on a body it compressed. Connect unary
//   error bodies are never compressed here (connect-es would compress one of
//   32 KiB; error-shape.ts caps errors below that).
// - Errors: Connect unary as connect-es writes them (codeToHttpStatus, a JSON
//   body from errorToJsonBytes with the details, the error's metadata as
//   headers); a Connect stream's end-stream message (error and trailers);
//   gRPC trailers by setTrailerStatus (grpc-status, grpc-message,
//   grpc-status-details-bin, the error's metadata). gRPC-web is always
//   connect-es's. A throw that is no ConnectError is INTERNAL "internal
//   error", logged by the error-shaping interceptor.
// - Headers and trailers the handler sets: gRPC headers with content-type
//   (and grpc-encoding) before the message, trailers with the status after;
//   Connect unary trailers as trailer- headers (trailerMux); a stream's
//   headers go out with its first message, as connect-es sends them.
// - Abort: the call's signal aborts when the client goes away before the
//   answer ends (CANCELED; connect-es gives the HTTP/2 reset's code, which
//   no client is left to see), on the deadline, or at shutdown
//   (shutdownSignal, its reason given); a method's stream is closed once the
//   response is gone. Unlike connect-es it does not abort when a call simply
//   ends (each such abort built a DOMException).
// - The call's final status is recorded for the request log and the metrics
//   (recordOutcome) as the adapter reads it off connect-es's responses
//   (call-status.ts).
import type { IncomingHttpHeaders } from "node:http";
import { Code, ConnectError, type ContextKey, type ContextValues, type HandlerContext, type MethodImplSpec } from "@connectrpc/connect";
import type { UniversalHandlerOptions } from "@connectrpc/connect/protocol";
import { parseTimeout as parseConnectTimeout } from "@connectrpc/connect/protocol-connect";
import { parseTimeout as parseGrpcTimeout, setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import type { RequestHandler } from "./listener.js";
import { callAbortKey } from "./call-abort.js";
import { callStatusKey, refusalOf, type CallStatus } from "./call-status.js";
import { asConnectError, shapeError } from "./error-shape.js";
import { onAbort, type Abortable } from "../abort.js";

export type NodeRequest = Parameters<RequestHandler>[0];
export type NodeResponse = Parameters<RequestHandler>[1];

/** The router's options, as connect-es completes them (validateUniversalHandlerOptions). */
export type ShortOptions = UniversalHandlerOptions;

/** Hands a request to the standard path, with the body bytes a short path already read (and the rest still unread). */
export type HandOver = (alreadyRead: Uint8Array[]) => void;

/** A short path for one method: answers the request, or hands it over. */
export type ShortCall = (req: NodeRequest, res: NodeResponse, handOver: HandOver) => void;

/** How a request travels: gRPC (always HTTP/2 here) or Connect, binary or JSON. */
export interface Wire {
  grpc: boolean;
  binary: boolean;
}

export const identityEncoding = (encoding: string | string[] | undefined) => encoding === undefined || encoding === "identity";

/** The request headers as a Headers object, as connect-node builds them (HTTP/2 pseudo-headers left out). */
export function webHeaders(headers: IncomingHttpHeaders): Headers {
  const out = new Headers();
  for (const key in headers) {
    if (key.startsWith(":")) continue;
    const value = headers[key];
    if (typeof value === "string") out.append(key, value);
    else if (Array.isArray(value)) for (const item of value) out.append(key, item);
  }
  return out;
}

export function nodeHeaders(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  headers.forEach((value, key) => {
    out[key] = value;
  });
  return out;
}

/**
 * Reads the whole body, up to `limit` bytes. Past the limit it stops
 * reading, pauses the request and reports `over` with what it read, so the
 * standard path can read on and refuse it in its own words.
 */
export function readBody(req: NodeRequest, limit: number): Promise<{ chunks: Buffer[]; size: number; over: boolean }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = () => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onError);
      req.off("close", onClose);
    };
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.byteLength;
      if (size > limit) {
        stop();
        req.pause();
        resolve({ chunks, size, over: true });
      }
    };
    const onEnd = () => {
      stop();
      resolve({ chunks, size, over: false });
    };
    const onError = (error: Error) => {
      stop();
      reject(error);
    };
    const onClose = () => {
      stop();
      reject(new ConnectError("the client went away before its request ended", Code.Canceled));
    };
    req.on("data", onData);
    req.once("end", onEnd);
    req.once("error", onError);
    req.once("close", onClose);
  });
}

export const GRPC_FRAME_HEADER = 5;

/** One frame: the flags byte, the length, the data. */
export function frame(flags: number, data: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(GRPC_FRAME_HEADER + data.byteLength);
  out[0] = flags;
  out.writeUInt32BE(data.byteLength, 1);
  out.set(data, GRPC_FRAME_HEADER);
  return out;
}

const sharedFrames = new WeakMap<Uint8Array, Buffer>();

/** The uncompressed frame of bytes many streams send (kept while the bytes are); nobody writes into it. */
export function sharedFrame(data: Uint8Array): Buffer {
  let out = sharedFrames.get(data);
  if (out === undefined) {
    out = frame(0, data);
    sharedFrames.set(data, out);
  }
  return out;
}

/** The message of a gRPC body that is exactly one uncompressed frame; undefined otherwise. */
export function singleFrame(body: Buffer): Buffer | undefined {
  if (body.byteLength < GRPC_FRAME_HEADER || body[0] !== 0) return undefined;
  return body.readUInt32BE(1) === body.byteLength - GRPC_FRAME_HEADER ? body.subarray(GRPC_FRAME_HEADER) : undefined;
}

/** The reason a call's deadline gives, in connect-es's words. */
const deadlineExceeded = () => new ConnectError("the operation timed out", Code.DeadlineExceeded);

/** Bytes that go out as they are (already encoded), held to the write limit as connect-es's serializers hold what they write. */
export function withinWriteLimit(bytes: Uint8Array, writeMaxBytes: number): Uint8Array {
  if (bytes.byteLength > writeMaxBytes) throw new ConnectError(`message size ${bytes.byteLength} is larger than configured writeMaxBytes ${writeMaxBytes}`, Code.ResourceExhausted);
  return bytes;
}

/**
 * A call's signal: aborted by its deadline, by the server shutting down, or
 * by the client going away — never when it simply ends. The AbortSignal is
 * made when something first reads it: Node gives every AbortSignal three
 * hidden classes of its own, made in the old generation, and a waited Send
 * listens through callAbortKey instead.
 */
export class CallSignal implements Abortable {
  private controller: AbortController | undefined;
  private abortedFor: { reason: unknown } | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly stopListening: () => void;
  /** Told when the call aborts (see callAbortKey): usually none, at most a few. */
  private listeners: Array<() => void> | undefined;
  private readonly closed = () => {
    // Closed before the answer ended (an HTTP/2 stream reset by its client reads as writableFinished).
    if (!this.res.writableEnded) this.abort(new ConnectError("the client went away", Code.Canceled));
  };

  constructor(
    shutdown: AbortSignal | undefined,
    timeoutMs: number | undefined,
    private readonly res: NodeResponse,
  ) {
    // A deadline already passed aborts the call before its handler runs, as connect-es's deadline signal does.
    if (timeoutMs !== undefined && timeoutMs <= 0) this.abort(deadlineExceeded());
    else if (timeoutMs !== undefined) this.timer = setTimeout(() => this.abort(deadlineExceeded()), timeoutMs);
    this.stopListening = shutdown === undefined ? () => undefined : onAbort(shutdown, () => this.abort(shutdown.reason));
    res.once("close", this.closed);
  }

  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (this.abortedFor !== undefined) this.controller.abort(this.abortedFor.reason);
    }
    return this.controller.signal;
  }

  get aborted(): boolean {
    return this.abortedFor !== undefined;
  }

  /** Why the call was aborted (undefined while it was not). */
  get reason(): unknown {
    return this.abortedFor?.reason;
  }

  listen(listener: () => void): () => void {
    const listeners = (this.listeners ??= []);
    listeners.push(listener);
    return () => {
      const at = listeners.indexOf(listener);
      if (at >= 0) listeners.splice(at, 1);
    };
  }

  private abort(reason: unknown): void {
    if (this.abortedFor !== undefined) return;
    this.abortedFor = { reason };
    this.controller?.abort(reason);
    const told = this.listeners;
    this.listeners = undefined;
    if (told !== undefined) for (const listener of told) listener();
  }

  /**
   * The call is over: nothing is aborted, the timer and listeners go. The
   * response's close listener goes too: under load Node keeps a closed HTTP/2
   * stream, and what hangs on it, until a full GC (see connection-limits.ts),
   * and this call's signal and what listens to it would be promoted with it.
   */
  release(): void {
    clearTimeout(this.timer);
    this.stopListening();
    this.listeners = undefined;
    this.res.off("close", this.closed);
  }
}

export function headerValue(value: string | string[] | undefined): string | null {
  return value === undefined ? null : Array.isArray(value) ? value.join(", ") : value;
}

/**
 * connect-es's ContextValues (createContextValues), with its methods on a
 * prototype: the object literal it returns makes three new functions for
 * every call, which an open Watch holds for as long as it lasts.
 */
class CallValues implements ContextValues {
  get<T>(key: ContextKey<T>): T {
    return key.id in this ? ((this as Record<symbol, unknown>)[key.id] as T) : key.defaultValue;
  }

  set<T>(key: ContextKey<T>, value: T): this {
    (this as Record<symbol, unknown>)[key.id] = value;
    return this;
  }

  delete(key: ContextKey<unknown>): this {
    delete (this as Record<symbol, unknown>)[key.id];
    return this;
  }
}

/**
 * The context connect-es gives a handler, for a call answered on a short
 * path; its signal is the call's, made when first read (see CallSignal).
 */
export class ShortCallContext implements HandlerContext {
  readonly method: MethodImplSpec["method"];
  readonly service: MethodImplSpec["method"]["parent"];
  readonly requestMethod = "POST";
  readonly requestHeader: Headers;
  readonly responseHeader = new Headers();
  readonly responseTrailer = new Headers();
  readonly values: ContextValues;
  readonly url: string;
  readonly timeoutMs: () => number | undefined;

  constructor(
    spec: MethodImplSpec,
    req: NodeRequest,
    readonly protocolName: string,
    private readonly call: CallSignal,
    timeoutMs: number | undefined,
    status: CallStatus,
  ) {
    const deadline = timeoutMs === undefined ? undefined : Date.now() + timeoutMs;
    const authority = req.headers[":authority"] ?? req.headers.host ?? "localhost";
    const scheme = "encrypted" in req.socket && req.socket.encrypted ? "https" : "http";
    this.method = spec.method;
    this.service = spec.method.parent;
    this.timeoutMs = () => (deadline === undefined ? undefined : deadline - Date.now());
    this.requestHeader = webHeaders(req.headers);
    this.values = new CallValues().set(callStatusKey, status).set(callAbortKey, call);
    this.url = `${scheme}://${authority}${req.url ?? ""}`;
  }

  get signal(): AbortSignal {
    return this.call.signal;
  }
}

/** Answers one call whose one request message has been read. */
export type AnswerCall = (req: NodeRequest, res: NodeResponse, wire: Wire, message: Buffer, timeoutMs: number | undefined) => Promise<void>;

/**
 * A short path's entry: a request `wireOf` takes, with a deadline header that
 * parses and a body of one message within the read limit (in one
 * uncompressed frame when `framed`), is read and answered; anything else goes
 * the standard way, with whatever was read handed over.
 */
export function shortEntry(options: ShortOptions, wireOf: (req: NodeRequest) => Wire | undefined, framed: (wire: Wire) => boolean, answer: AnswerCall): ShortCall {
  return (req, res, handOver) => {
    const wire = wireOf(req);
    if (wire === undefined || (!wire.grpc && options.requireConnectProtocolHeader)) return handOver([]);
    const timeout = wire.grpc
      ? parseGrpcTimeout(headerValue(req.headers["grpc-timeout"]), options.maxTimeoutMs)
      : parseConnectTimeout(headerValue(req.headers["connect-timeout-ms"]), options.maxTimeoutMs);
    const inFrame = framed(wire);
    const limit = options.readMaxBytes + (inFrame ? GRPC_FRAME_HEADER : 0);
    const declared = Number(req.headers["content-length"] ?? 0);
    if (timeout.error !== undefined || !(declared <= limit)) return handOver([]);
    readBody(req, limit)
      .then(
        ({ chunks, size, over }) => {
          if (over) return handOver(chunks);
          const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
          const message = inFrame ? singleFrame(body) : body;
          if (message === undefined) return handOver([body]);
          return answer(req, res, wire, message, timeout.timeoutMs);
        },
        () => {
          // The request broke off while being read: nobody is left to answer.
          if (!res.destroyed) res.destroy();
        },
      )
      .catch((error: unknown) => {
        // A write that failed: the connection is gone.
        if (!res.destroyed) res.destroy(error instanceof Error ? error : undefined);
      });
  };
}

/** A success with no trailers of the handler's: what connect-es writes then (HTTP/2 copies it into the stream). */
const OK_TRAILERS: Readonly<Record<string, string>> = Object.freeze({ "grpc-status": "0" });

function isEmpty(headers: Headers): boolean {
  for (const _ of headers.keys()) return false;
  return true;
}

/** gRPC's trailers: the handler's, and the call's status. */
export function addGrpcTrailers(res: NodeResponse, context: HandlerContext, failure: ConnectError | undefined): void {
  const target = res as unknown as { addTrailers(headers: Readonly<Record<string, string>>): void };
  // The common case costs no Headers object: ending 10,000 Watch streams built 10,000 of them.
  if (failure === undefined && isEmpty(context.responseTrailer)) return target.addTrailers(OK_TRAILERS);
  const trailer = new Headers(context.responseTrailer);
  setTrailerStatus(trailer, failure);
  target.addTrailers(nodeHeaders(trailer));
}

/** A call's failure as clients see it: the interceptors shaped what the method threw; errors reading the request are shaped here. */
export function failureOf(error: unknown): ConnectError {
  return shapeError(asConnectError(error) ?? new ConnectError("internal error", Code.Internal, undefined, undefined, error));
}

/** The call's final status, for the request log and the metrics. */
export function recordOutcome(status: CallStatus, failure: ConnectError | undefined): void {
  status.code = failure === undefined ? null : failure.code;
  if (failure !== undefined) {
    status.message = failure.rawMessage;
    status.refusal = refusalOf(failure);
  }
}
