// Malformed request messages are the caller's fault: INVALID_ARGUMENT, as
// for malformed JSON. connect-es reports an unparseable *binary* request as
// INTERNAL (its parser is shared with clients, for which a bad response is an
// internal error). For streaming methods the parse runs inside the
// interceptor chain and `requestParseAsInvalidArgument` fixes it there; for
// unary methods it runs before any interceptor, so `fixUnaryParseError`
// corrects the finished response of each protocol.
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import type { UniversalHandler, UniversalServerResponse } from "@connectrpc/connect/protocol";

const PARSE_PREFIX = "parse binary:";

function isRequestParseError(error: unknown): error is ConnectError {
  return error instanceof ConnectError && error.code === Code.Internal && error.rawMessage.startsWith(PARSE_PREFIX);
}

function asInvalidArgument(error: ConnectError): ConnectError {
  return new ConnectError(`malformed request message: ${error.rawMessage.slice(PARSE_PREFIX.length).trim()}`, Code.InvalidArgument);
}

export const requestParseAsInvalidArgument: Interceptor = (next) => async (req) => {
  try {
    return await next(req);
  } catch (error) {
    throw isRequestParseError(error) ? asInvalidArgument(error) : error;
  }
};

async function collect(body: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const part of body) parts.push(part);
  return Buffer.concat(parts);
}

async function* once(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}

const decoder = new TextDecoder();
const encoder = new TextEncoder();

function grpcMessage(value: string | null): string {
  try {
    return decodeURIComponent(value ?? "");
  } catch {
    return value ?? "";
  }
}

/** Connect unary: a JSON error body with HTTP 500. */
async function fixConnectUnary(res: UniversalServerResponse): Promise<UniversalServerResponse> {
  if (res.status !== 500 || res.body === undefined || res.header?.get("content-encoding")) return res;
  const bytes = await collect(res.body);
  try {
    const error = JSON.parse(decoder.decode(bytes)) as { code?: string; message?: string };
    if (error.code === "internal" && error.message?.startsWith(PARSE_PREFIX)) {
      const fixed = asInvalidArgument(new ConnectError(error.message, Code.Internal));
      const body = encoder.encode(JSON.stringify({ code: "invalid_argument", message: fixed.rawMessage }));
      res.header?.set("content-length", String(body.byteLength));
      return { ...res, status: 400, body: once(body) };
    }
  } catch {
    // Not our JSON error: pass it through unchanged.
  }
  return { ...res, body: once(bytes) };
}

/** gRPC: the status travels in trailers, written after the body ends. */
function fixGrpc(res: UniversalServerResponse): UniversalServerResponse {
  const trailer = res.trailer;
  const body = res.body;
  if (trailer === undefined || body === undefined) return res;
  return {
    ...res,
    body: (async function* () {
      yield* body;
      if (trailer.get("grpc-status") === String(Code.Internal) && grpcMessage(trailer.get("grpc-message")).startsWith(PARSE_PREFIX)) {
        const fixed = asInvalidArgument(new ConnectError(grpcMessage(trailer.get("grpc-message")), Code.Internal));
        trailer.set("grpc-status", String(Code.InvalidArgument));
        trailer.set("grpc-message", encodeURIComponent(fixed.rawMessage));
      }
    })(),
  };
}

/** gRPC-web: the status travels in a trailer frame (flag 0x80) inside the body. */
async function fixGrpcWeb(res: UniversalServerResponse): Promise<UniversalServerResponse> {
  if (res.body === undefined) return res;
  const bytes = await collect(res.body);
  // A request that failed to parse produced no message: the body is one trailer frame.
  if (bytes.byteLength >= 5 && bytes[0] === 0x80 && new DataView(bytes.buffer, bytes.byteOffset).getUint32(1) === bytes.byteLength - 5) {
    const text = decoder.decode(bytes.subarray(5));
    const status = /^grpc-status: *(\d+)/im.exec(text)?.[1];
    const message = grpcMessage(/^grpc-message: *(.*?)\r?$/im.exec(text)?.[1] ?? null);
    if (status === String(Code.Internal) && message.startsWith(PARSE_PREFIX)) {
      const fixed = asInvalidArgument(new ConnectError(message, Code.Internal));
      const trailer = encoder.encode(`grpc-status: ${Code.InvalidArgument}\r\ngrpc-message: ${encodeURIComponent(fixed.rawMessage)}\r\n`);
      const frame = new Uint8Array(5 + trailer.byteLength);
      frame[0] = 0x80;
      new DataView(frame.buffer).setUint32(1, trailer.byteLength);
      frame.set(trailer, 5);
      return { ...res, body: once(frame) };
    }
  }
  return { ...res, body: once(bytes) };
}

/** Wraps a unary handler so that an unparseable request message answers INVALID_ARGUMENT. */
export function fixUnaryParseError(handler: UniversalHandler): UniversalHandler {
  if (handler.method.methodKind !== "unary") return handler;
  const wrapped = async (req: Parameters<UniversalHandler>[0]) => {
    const res = await handler(req);
    const contentType = req.header.get("content-type") ?? "";
    if (contentType.startsWith("application/grpc-web")) return fixGrpcWeb(res);
    if (contentType.startsWith("application/grpc")) return fixGrpc(res);
    return fixConnectUnary(res);
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
