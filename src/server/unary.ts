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
// clients cannot tell the paths apart (test/short-path-parity.test.ts
// compares them with connect-es's own pipeline, call for call).
//
// The method itself is called through the interceptors by invoke-unary.ts,
// which leaves the call's AbortSignal unmade unless something reads it.
//
// Which calls come here, and what of connect-es's pipeline is kept (errors,
// interceptors, deadlines, compression, limits): the list in short-call.ts.
import { type ConnectError, type HandlerContext, type MethodImplSpec } from "@connectrpc/connect";
import { compressionNegotiate, createMethodSerializationLookup, type Compression } from "@connectrpc/connect/protocol";
import { codeToHttpStatus, errorToJsonBytes, trailerMux } from "@connectrpc/connect/protocol-connect";
import { knownEncoding } from "../protocol/encoded.js";
import { invokeUnary } from "./invoke-unary.js";
import { callStatusFor } from "./request-log.js";
import { addGrpcTrailers, CallSignal, failureOf, frame, headerValue, identityEncoding, nodeHeaders, recordOutcome, ShortCallContext, shortEntry, withinWriteLimit, type AnswerCall, type NodeRequest, type NodeResponse, type ShortCall, type ShortOptions, type Wire } from "./short-call.js";

/** The requests this path answers: every other content type, and any request encoding, go the standard way. */
function wireOf(req: NodeRequest): Wire | undefined {
  if (req.method !== "POST") return undefined;
  const type = req.headers["content-type"]?.toLowerCase();
  switch (type) {
    case "application/grpc":
    case "application/grpc+proto":
      return req.httpVersionMajor === 2 && identityEncoding(req.headers["grpc-encoding"]) ? { grpc: true, binary: true } : undefined;
    case "application/proto":
      return identityEncoding(req.headers["content-encoding"]) ? { grpc: false, binary: true } : undefined;
    case "application/json":
    case "application/json; charset=utf-8":
      return identityEncoding(req.headers["content-encoding"]) ? { grpc: false, binary: false } : undefined;
    default:
      return undefined;
  }
}

/** The fast path for one unary method, or undefined for a method that is not unary. */
export function unaryCall(spec: MethodImplSpec, options: ShortOptions): ShortCall | undefined {
  if (spec.kind !== "unary") return undefined;
  const serialization = createMethodSerializationLookup(spec.method, options.binaryOptions, options.jsonOptions, options);

  const answer: AnswerCall = async (req, res, wire, body, timeoutMs) => {
    const status = callStatusFor(req);
    const call = new CallSignal(options.shutdownSignal, timeoutMs, res);
    const context = new ShortCallContext(spec, req, wire.grpc ? "grpc" : "connect", call, timeoutMs, status);
    let reply: Uint8Array | undefined;
    let failure: ConnectError | undefined;
    try {
      const input = serialization.getI(wire.binary).parse(body);
      const output = await invokeUnary(spec, context, input, options.interceptors);
      // A response built from bytes already encoded (a Send reply) goes out as those bytes.
      const known = wire.binary ? knownEncoding(output) : undefined;
      reply = known === undefined ? serialization.getO(wire.binary).serialize(output) : withinWriteLimit(known, options.writeMaxBytes);
    } catch (error) {
      failure = failureOf(error);
    } finally {
      call.release();
    }
    recordOutcome(status, failure);
    if (res.destroyed || res.writableEnded) return; // the client went away meanwhile

    // gRPC names the encoding it negotiated whatever the reply's size (and whether there is one);
    // Connect only a body it compressed.
    let compression: Compression | null = null;
    const large = reply !== undefined && reply.byteLength >= options.compressMinBytes;
    if (wire.grpc || large) {
      const accept = wire.grpc ? "grpc-accept-encoding" : "accept-encoding";
      compression = compressionNegotiate(options.acceptCompression, null, headerValue(req.headers[accept]), accept).response;
    }
    let compressed = false;
    if (compression !== null && large) {
      reply = await compression.compress(reply!);
      compressed = true;
    }
    if (res.destroyed || res.writableEnded) return;
    if (wire.grpc) writeGrpc(res, context, wire, reply, failure, compression, compressed);
    else writeConnect(res, context, wire, reply, failure, compressed ? compression : null, options.jsonOptions);
  };

  // A gRPC message comes in a frame; a Connect unary one is the body itself.
  return shortEntry(options, wireOf, (wire) => wire.grpc, answer);
}

/** gRPC: the message in one frame, the status in trailers (a failed call sends headers and trailers only). */
function writeGrpc(res: NodeResponse, context: HandlerContext, wire: Wire, reply: Uint8Array | undefined, failure: ConnectError | undefined, compression: Compression | null, compressed: boolean): void {
  const header = nodeHeaders(context.responseHeader);
  header["content-type"] = wire.binary ? "application/grpc+proto" : "application/grpc+json";
  if (compression !== null) header["grpc-encoding"] = compression.name;
  res.writeHead(200, header);
  addGrpcTrailers(res, context, failure);
  if (reply === undefined) {
    res.end();
    return;
  }
  res.end(frame(compressed ? 1 : 0, reply));
}

/** Connect unary: the message as the body, trailers as trailer- headers; a failure is a JSON error with its HTTP status. */
function writeConnect(
  res: NodeResponse,
  context: HandlerContext,
  wire: Wire,
  reply: Uint8Array | undefined,
  failure: ConnectError | undefined,
  compression: Compression | null,
  jsonOptions: ShortOptions["jsonOptions"],
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
