// The common call, answered without connect-es's stream machinery: a unary
// method over gRPC (HTTP/2) or Connect, with an uncompressed body.
//
// connect-es runs every gRPC call, unary ones too, through a chain of async
// iterables (split, decompress, parse, invoke, serialize, compress, join),
// and ends every call by aborting its signal, which builds a DOMException
// with a stack trace each time. For a small call that machinery cost more
// server CPU than verifying and signing its envelopes. Here the body is read
// whole, parsed and answered with connect-es's own serializers, interceptors
// and error encodings, and the answer is written as connect-es writes it:
// clients cannot tell the paths apart, and the protocol tests run on both.
//
// Anything else goes the standard way, with the bytes already read handed
// over: gRPC-web, streaming methods, compressed requests, gRPC over
// HTTP/1.1, a body over the size limit, a frame that is not exactly one
// uncompressed message, a deadline header that does not parse.
import type { IncomingHttpHeaders } from "node:http";
import { Code, ConnectError, createContextValues, type HandlerContext, type MethodImplSpec } from "@connectrpc/connect";
import { compressionNegotiate, createMethodSerializationLookup, invokeUnaryImplementation, type Compression, type UniversalHandlerOptions } from "@connectrpc/connect/protocol";
import { codeToHttpStatus, errorToJsonBytes, parseTimeout as parseConnectTimeout, trailerMux } from "@connectrpc/connect/protocol-connect";
import { parseTimeout as parseGrpcTimeout, setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import type { RequestHandler } from "./listener.js";
import { callStatusKey, refusalOf } from "./call-status.js";
import { shapeError } from "./error-shape.js";
import { callStatusFor } from "./request-log.js";

type NodeRequest = Parameters<RequestHandler>[0];
type NodeResponse = Parameters<RequestHandler>[1];

/** The router's options, as connect-es completes them (validateUniversalHandlerOptions). */
export type UnaryOptions = UniversalHandlerOptions;

/** Hands a request to the standard path, with the body bytes this path already read (and the rest still unread). */
export type HandOver = (alreadyRead: Uint8Array[]) => void;

interface Wire {
  grpc: boolean;
  binary: boolean;
}

/** The requests this path answers: every other content type, and any request encoding, go the standard way. */
function wireOf(req: NodeRequest): Wire | undefined {
  if (req.method !== "POST") return undefined;
  const type = req.headers["content-type"]?.toLowerCase();
  switch (type) {
    case "application/grpc":
    case "application/grpc+proto":
      return req.httpVersionMajor === 2 && identity(req.headers["grpc-encoding"]) ? { grpc: true, binary: true } : undefined;
    case "application/proto":
      return identity(req.headers["content-encoding"]) ? { grpc: false, binary: true } : undefined;
    case "application/json":
    case "application/json; charset=utf-8":
      return identity(req.headers["content-encoding"]) ? { grpc: false, binary: false } : undefined;
    default:
      return undefined;
  }
}

const identity = (encoding: string | string[] | undefined) => encoding === undefined || encoding === "identity";

/** The request headers as a Headers object, as connect-node builds them (HTTP/2 pseudo-headers left out). */
function webHeaders(headers: IncomingHttpHeaders): Headers {
  const out = new Headers();
  for (const key in headers) {
    if (key.startsWith(":")) continue;
    const value = headers[key];
    if (typeof value === "string") out.append(key, value);
    else if (Array.isArray(value)) for (const item of value) out.append(key, item);
  }
  return out;
}

function nodeHeaders(headers: Headers): Record<string, string> {
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
function readBody(req: NodeRequest, limit: number): Promise<{ chunks: Buffer[]; size: number; over: boolean }> {
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

const GRPC_FRAME_HEADER = 5;

/** The message of a gRPC body that is exactly one uncompressed frame; undefined otherwise. */
function singleFrame(body: Buffer): Buffer | undefined {
  if (body.byteLength < GRPC_FRAME_HEADER || body[0] !== 0) return undefined;
  return body.readUInt32BE(1) === body.byteLength - GRPC_FRAME_HEADER ? body.subarray(GRPC_FRAME_HEADER) : undefined;
}

/** A call's signal: aborted by its deadline, by the server shutting down, or by the client going away — never when it simply ends. */
class CallSignal {
  private readonly controller = new AbortController();
  private timer: NodeJS.Timeout | undefined;
  private readonly onShutdown = () => this.abort(this.shutdown?.reason);

  constructor(
    private readonly shutdown: AbortSignal | undefined,
    timeoutMs: number | undefined,
    res: NodeResponse,
  ) {
    if (timeoutMs !== undefined) this.timer = setTimeout(() => this.abort(new ConnectError("the operation timed out", Code.DeadlineExceeded)), timeoutMs);
    if (shutdown?.aborted) this.onShutdown();
    else shutdown?.addEventListener("abort", this.onShutdown);
    res.once("close", () => {
      if (!res.writableFinished) this.abort(new ConnectError("the client went away", Code.Canceled));
    });
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  private abort(reason: unknown): void {
    if (!this.controller.signal.aborted) this.controller.abort(reason);
  }

  /** The call is over: nothing is aborted, the timer and listener go. */
  release(): void {
    clearTimeout(this.timer);
    this.shutdown?.removeEventListener("abort", this.onShutdown);
  }
}

export type UnaryCall = (req: NodeRequest, res: NodeResponse, handOver: HandOver) => void;

/** The fast path for one unary method, or undefined for a method that is not unary. */
export function unaryCall(spec: MethodImplSpec, options: UnaryOptions): UnaryCall | undefined {
  if (spec.kind !== "unary") return undefined;
  const serialization = createMethodSerializationLookup(spec.method, options.binaryOptions, options.jsonOptions, options);

  const answer = async (req: NodeRequest, res: NodeResponse, wire: Wire, body: Buffer, timeoutMs: number | undefined) => {
    const status = callStatusFor(req);
    const call = new CallSignal(options.shutdownSignal, timeoutMs, res);
    const deadline = timeoutMs === undefined ? undefined : Date.now() + timeoutMs;
    const authority = req.headers[":authority"] ?? req.headers.host ?? "localhost";
    const scheme = "encrypted" in req.socket && req.socket.encrypted ? "https" : "http";
    const context: HandlerContext = {
      method: spec.method,
      service: spec.method.parent,
      signal: call.signal,
      timeoutMs: () => (deadline === undefined ? undefined : deadline - Date.now()),
      requestMethod: "POST",
      requestHeader: webHeaders(req.headers),
      responseHeader: new Headers(),
      responseTrailer: new Headers(),
      protocolName: wire.grpc ? "grpc" : "connect",
      values: createContextValues().set(callStatusKey, status),
      url: `${scheme}://${authority}${req.url ?? ""}`,
    };
    let reply: Uint8Array | undefined;
    let failure: ConnectError | undefined;
    try {
      const input = serialization.getI(wire.binary).parse(body);
      const output = await invokeUnaryImplementation(spec, context, input, options.interceptors);
      reply = serialization.getO(wire.binary).serialize(output);
    } catch (error) {
      // The interceptors logged and shaped what the method threw; errors reading the request are shaped here.
      failure = shapeError(error instanceof ConnectError ? error : new ConnectError("internal error", Code.Internal, undefined, undefined, error));
    } finally {
      call.release();
    }
    status.code = failure === undefined ? null : failure.code;
    if (failure !== undefined) {
      status.message = failure.rawMessage;
      status.refusal = refusalOf(failure);
    }
    if (res.destroyed || res.writableEnded) return; // the client went away meanwhile

    let compression: Compression | null = null;
    if (reply !== undefined && reply.byteLength >= options.compressMinBytes) {
      const accept = wire.grpc ? "grpc-accept-encoding" : "accept-encoding";
      compression = compressionNegotiate(options.acceptCompression, null, headerValue(req.headers[accept]), accept).response;
      if (compression !== null) reply = await compression.compress(reply);
    }
    if (res.destroyed || res.writableEnded) return;
    if (wire.grpc) writeGrpc(res, context, wire, reply, failure, compression);
    else writeConnect(res, context, wire, reply, failure, compression, options.jsonOptions);
  };

  return (req, res, handOver) => {
    const wire = wireOf(req);
    if (wire === undefined || (!wire.grpc && options.requireConnectProtocolHeader)) return handOver([]);
    const timeout = wire.grpc
      ? parseGrpcTimeout(headerValue(req.headers["grpc-timeout"]), options.maxTimeoutMs)
      : parseConnectTimeout(headerValue(req.headers["connect-timeout-ms"]), options.maxTimeoutMs);
    const limit = options.readMaxBytes + (wire.grpc ? GRPC_FRAME_HEADER : 0);
    const declared = Number(req.headers["content-length"] ?? 0);
    if (timeout.error !== undefined || !(declared <= limit)) return handOver([]);
    readBody(req, limit).then(
      ({ chunks, size, over }) => {
        if (over) return handOver(chunks);
        const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
        const message = wire.grpc ? singleFrame(body) : body;
        if (message === undefined) return handOver([body]);
        return answer(req, res, wire, message, timeout.timeoutMs);
      },
      () => {
        // The request broke off while being read: nobody is left to answer.
        if (!res.destroyed) res.destroy();
      },
    ).catch((error: unknown) => {
      // A write that failed: the connection is gone.
      if (!res.destroyed) res.destroy(error instanceof Error ? error : undefined);
    });
  };
}

function headerValue(value: string | string[] | undefined): string | null {
  return value === undefined ? null : Array.isArray(value) ? value.join(", ") : value;
}

/** gRPC: the message in one frame, the status in trailers (a failed call sends headers and trailers only). */
function writeGrpc(res: NodeResponse, context: HandlerContext, wire: Wire, reply: Uint8Array | undefined, failure: ConnectError | undefined, compression: Compression | null): void {
  const header = nodeHeaders(context.responseHeader);
  header["content-type"] = wire.binary ? "application/grpc+proto" : "application/grpc+json";
  if (compression !== null) header["grpc-encoding"] = compression.name;
  const trailer = new Headers(context.responseTrailer);
  setTrailerStatus(trailer, failure);
  res.writeHead(200, header);
  (res as { addTrailers(headers: Record<string, string>): void }).addTrailers(nodeHeaders(trailer));
  if (reply === undefined) {
    res.end();
    return;
  }
  const frame = Buffer.allocUnsafe(GRPC_FRAME_HEADER + reply.byteLength);
  frame[0] = compression === null ? 0 : 1;
  frame.writeUInt32BE(reply.byteLength, 1);
  frame.set(reply, GRPC_FRAME_HEADER);
  res.end(frame);
}

/** Connect unary: the message as the body, trailers as trailer- headers; a failure is a JSON error with its HTTP status. */
function writeConnect(
  res: NodeResponse,
  context: HandlerContext,
  wire: Wire,
  reply: Uint8Array | undefined,
  failure: ConnectError | undefined,
  compression: Compression | null,
  jsonOptions: UnaryOptions["jsonOptions"],
): void {
  let status = 200;
  let body: Uint8Array;
  if (failure === undefined) {
    context.responseHeader.set("content-type", wire.binary ? "application/proto" : "application/json");
    if (compression !== null) context.responseHeader.set("content-encoding", compression.name);
    body = reply!;
  } else {
    status = codeToHttpStatus(failure.code);
    context.responseHeader.set("content-type", "application/json");
    failure.metadata.forEach((value, key) => context.responseHeader.set(key, value));
    body = errorToJsonBytes(failure, jsonOptions);
  }
  const header = nodeHeaders(trailerMux(context.responseHeader, context.responseTrailer));
  header["content-length"] = String(body.byteLength);
  res.writeHead(status, header);
  res.end(body);
}
