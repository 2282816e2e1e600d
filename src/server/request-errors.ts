// Errors raised outside the interceptor chain, shaped like the rest (see
// error-shape.ts). For unary methods connect-es reads and parses the request
// (size limit, compression, timeout header, parse) before any interceptor
// runs, and serializes the reply after: such errors are found in the finished
// response of each protocol and rewritten there. For gRPC, whose status
// travels in trailers, every method's trailers are shaped: a trailer block
// over 64 KB would reset the stream instead of reporting the status.
import { Code, ConnectError } from "@connectrpc/connect";
import type { UniversalHandler, UniversalServerResponse } from "@connectrpc/connect/protocol";
import { codeToHttpStatus, errorFromJsonBytes, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import { findTrailerError, setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { trailerFlag, trailerParse, trailerSerialize } from "@connectrpc/connect/protocol-grpc-web";
import { compressionBrotli, compressionGzip } from "@connectrpc/connect-node";
import { shapeError } from "./error-shape.js";

const STATUS_FIELDS = ["grpc-status", "grpc-message", "grpc-status-details-bin"];

async function collect(body: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const part of body) parts.push(part);
  return Buffer.concat(parts);
}

async function* once(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}

/** Shapes the status in gRPC trailers (or a gRPC-web trailer frame) in place; true when it changed. */
function shapeTrailer(trailer: Headers): boolean {
  let found: ConnectError | undefined;
  try {
    found = findTrailerError(trailer);
  } catch {
    return false; // not a status we can read: leave it
  }
  if (found === undefined) return false;
  const error = new ConnectError(found.rawMessage, found.code);
  error.details.push(...found.details);
  const shaped = shapeError(error);
  if (shaped === error) return false;
  for (const field of STATUS_FIELDS) trailer.delete(field);
  setTrailerStatus(trailer, shaped);
  return true;
}

const compressions = [compressionGzip, compressionBrotli];

/** gRPC: the status is written after the body ends. */
function shapeGrpc(res: UniversalServerResponse): UniversalServerResponse {
  const { trailer, body } = res;
  if (trailer === undefined || body === undefined) return res;
  return {
    ...res,
    body: (async function* () {
      yield* body;
      shapeTrailer(trailer);
    })(),
  };
}

/**
 * gRPC-web unary: an error is a body of one trailer frame (flag 0x80, or 0x81
 * when compressed with the response's grpc-encoding), and no message. The
 * frame is re-written uncompressed.
 */
async function shapeGrpcWeb(res: UniversalServerResponse, readMaxBytes: number): Promise<UniversalServerResponse> {
  if (res.body === undefined) return res;
  const it = res.body[Symbol.asyncIterator]();
  const first = await it.next();
  if (first.done === true) return { ...res, body: once(new Uint8Array(0)) };
  const rest = (async function* () {
    yield first.value;
    for (let next = await it.next(); next.done !== true; next = await it.next()) yield next.value;
  })();
  if ((first.value[0]! & trailerFlag) !== trailerFlag) return { ...res, body: rest };
  const bytes = await collect(rest);
  try {
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    if (bytes.byteLength < 5 || view.getUint32(1) !== bytes.byteLength - 5) return { ...res, body: once(bytes) };
    let data = bytes.subarray(5);
    if (bytes[0] === (trailerFlag | 1)) {
      const compression = compressions.find((c) => c.name === res.header?.get("grpc-encoding"));
      if (compression === undefined) return { ...res, body: once(bytes) };
      data = await compression.decompress(data, readMaxBytes);
    } else if (bytes[0] !== trailerFlag) return { ...res, body: once(bytes) };
    const trailer = trailerParse(data);
    if (!shapeTrailer(trailer)) return { ...res, body: once(bytes) };
    const serialized = trailerSerialize(trailer);
    const frame = new Uint8Array(5 + serialized.byteLength);
    frame[0] = trailerFlag;
    new DataView(frame.buffer).setUint32(1, serialized.byteLength);
    frame.set(serialized, 5);
    return { ...res, body: once(frame) };
  } catch {
    return { ...res, body: once(bytes) }; // not a trailer we can read: leave it as it is
  }
}

/** Connect unary: a JSON error body (compressed, when the client accepts it and it is large) with an HTTP status. */
async function shapeConnectUnary(res: UniversalServerResponse, readMaxBytes: number): Promise<UniversalServerResponse> {
  if (res.status === 200 || res.body === undefined) return res;
  const original = await collect(res.body);
  const encoding = res.header?.get("content-encoding");
  let bytes = original;
  if (encoding) {
    const compression = compressions.find((c) => c.name === encoding);
    if (compression === undefined) return { ...res, body: once(original) };
    try {
      bytes = await compression.decompress(original, readMaxBytes);
    } catch {
      return { ...res, body: once(original) };
    }
  }
  let shaped: ConnectError;
  let body: Uint8Array;
  try {
    const error = errorFromJsonBytes(bytes, undefined, new ConnectError("", Code.Unknown));
    shaped = shapeError(error);
    if (shaped === error) return { ...res, body: once(original) };
    body = errorToJsonBytes(shaped, undefined);
  } catch {
    return { ...res, body: once(original) }; // not an error body we can read (a 404 page, say)
  }
  const header = new Headers(res.header);
  header.delete("content-encoding");
  header.set("content-length", String(body.byteLength));
  return { ...res, status: codeToHttpStatus(shaped.code), header, body: once(body) };
}

/** Wraps a handler so that errors raised outside the interceptor chain are shaped too. */
export function shapeResponseErrors(handler: UniversalHandler, readMaxBytes: number): UniversalHandler {
  const unary = handler.method.methodKind === "unary";
  const wrapped = async (req: Parameters<UniversalHandler>[0]) => {
    const res = await handler(req);
    const contentType = (req.header.get("content-type") ?? "").toLowerCase();
    if (contentType.startsWith("application/grpc-web")) return unary ? shapeGrpcWeb(res, readMaxBytes) : res;
    if (contentType.startsWith("application/grpc")) return shapeGrpc(res);
    return unary ? shapeConnectUnary(res, readMaxBytes) : res;
  };
  return Object.assign(wrapped, {
    protocolNames: handler.protocolNames,
    service: handler.service,
    method: handler.method,
    requestPath: handler.requestPath,
    allowedMethods: handler.allowedMethods,
    supportedContentType: handler.supportedContentType,
  });
}
