// Server streams (Watch, WatchGroup, ReadResult), answered without
// connect-es's stream machinery: over gRPC (HTTP/2) or the Connect streaming
// protocol, with an uncompressed request.
//
// connect-es passes every message of a stream through a chain of async
// iterables (its own generators, compiled to promise-based shims: invoke,
// normalize, serialize, catch, compress, join, then the writer), and ends each
// call by aborting its signal, which builds a DOMException with a stack trace.
// One event told to 10,000 Watch streams spent about 30% of its CPU in those
// iterables and 17% in the aborts. Here each message the method yields is
// serialized with connect-es's serializers, framed and written at once, with
// the response's back-pressure respected; headers go out with the first
// message, as connect-es sends them, and the end is written as connect-es
// writes it (gRPC trailers, or the Connect end-stream message). The
// interceptors wrap the call as they do on the standard path.
//
// Which calls come here, and what of connect-es's pipeline is kept (errors,
// interceptors, deadlines, compression, limits): the list in short-call.ts.
import { create, isMessage, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { ConnectError, Code, type HandlerContext, type MethodImplSpec, type StreamRequest, type StreamResponse } from "@connectrpc/connect";
import { compressionNegotiate, createMethodSerializationLookup, type Compression } from "@connectrpc/connect/protocol";
import { createEndStreamSerialization, endStreamFlag } from "@connectrpc/connect/protocol-connect";
import { contextFor, copyHeaders } from "./invoke-unary.js";
import { callStatusFor } from "./request-log.js";
import { knownEncoding } from "../protocol/encoded.js";
import { writeWaiting } from "./write-waiting.js";
import { addGrpcTrailers, CallSignal, failureOf, frame, headerValue, identityEncoding, nodeHeaders, recordOutcome, sharedFrame, ShortCallContext, shortEntry, withinWriteLimit, type AnswerCall, type NodeRequest, type ShortCall, type ShortOptions, type Wire } from "./short-call.js";

/** The requests this path answers. */
function streamWireOf(req: NodeRequest): Wire | undefined {
  if (req.method !== "POST") return undefined;
  switch (req.headers["content-type"]?.toLowerCase()) {
    case "application/grpc":
    case "application/grpc+proto":
      return req.httpVersionMajor === 2 && identityEncoding(req.headers["grpc-encoding"]) ? { grpc: true, binary: true } : undefined;
    case "application/connect+proto":
      return identityEncoding(req.headers["connect-content-encoding"]) ? { grpc: false, binary: true } : undefined;
    case "application/connect+json":
    case "application/connect+json; charset=utf-8":
      return identityEncoding(req.headers["connect-content-encoding"]) ? { grpc: false, binary: false } : undefined;
    default:
      return undefined;
  }
}

type AnyStreamFn = (req: StreamRequest) => Promise<StreamResponse>;

/**
 * The request stream of one message, as connect-es's createAsyncIterable
 * makes it but without its per-call generator machinery (a downleveled
 * async generator: a new generator function, its prototype and half a dozen
 * closures), which an open Watch holds for as long as it lasts.
 */
function oneMessage<T>(message: T): AsyncIterable<T> {
  return {
    [Symbol.asyncIterator](): AsyncIterator<T> {
      let taken = false;
      return {
        next: () => {
          if (taken) return Promise.resolve({ done: true, value: undefined });
          taken = true;
          return Promise.resolve({ done: false, value: message });
        },
        return: () => {
          taken = true;
          return Promise.resolve({ done: true, value: undefined });
        },
      };
    },
  };
}

/** The fast path for one server-streaming method, or undefined for any other kind. */
export function serverStreamCall(spec: MethodImplSpec, options: ShortOptions): ShortCall | undefined {
  if (spec.kind !== "server_streaming") return undefined;
  const impl = spec.impl;
  const output: DescMessage = spec.method.output;
  const serialization = createMethodSerializationLookup(spec.method, options.binaryOptions, options.jsonOptions, options);
  const endStream = createEndStreamSerialization(options.jsonOptions);

  /** The method under the interceptors, as connect-es wraps it (the first interceptor outermost). */
  const invoke = (context: HandlerContext, input: MessageShape<DescMessage>): Promise<StreamResponse> => {
    const requestStream = oneMessage(input);
    let next: AnyStreamFn = async (req) => {
      // An interceptor may have replaced the request stream; its one message is then the input.
      let message = input;
      if (req.message !== requestStream) for await (const item of req.message) message = item;
      return { stream: true, message: impl(message as never, contextFor(context, req)) as AsyncIterable<never>, method: spec.method, service: spec.method.parent, header: context.responseHeader, trailer: context.responseTrailer };
    };
    for (const interceptor of [...(options.interceptors ?? [])].reverse()) next = interceptor(next as never) as AnyStreamFn;
    return next({
      stream: true,
      message: requestStream,
      method: spec.method,
      service: spec.method.parent,
      requestMethod: "POST",
      url: context.url,
      signal: context.signal,
      header: context.requestHeader,
      contextValues: context.values,
    } as StreamRequest);
  };

  const answer: AnswerCall = async (req, res, wire, body, timeoutMs) => {
    const status = callStatusFor(req);
    const call = new CallSignal(options.shutdownSignal, timeoutMs, res);
    const context = new ShortCallContext(spec, req, wire.grpc ? "grpc" : "connect", call, timeoutMs, status);
    const accept = wire.grpc ? "grpc-accept-encoding" : "connect-accept-encoding";
    const compression: Compression | null = compressionNegotiate(options.acceptCompression, null, headerValue(req.headers[accept]), accept).response;
    let headed = false;
    const head = () => {
      if (headed) return;
      headed = true;
      const header = nodeHeaders(context.responseHeader);
      header["content-type"] = wire.grpc ? "application/grpc+proto" : wire.binary ? "application/connect+proto" : "application/connect+json";
      if (compression !== null) header[wire.grpc ? "grpc-encoding" : "connect-content-encoding"] = compression.name;
      res.writeHead(200, header);
    };
    let failure: ConnectError | undefined;
    try {
      const input = serialization.getI(wire.binary).parse(body);
      const response = await invoke(context, input);
      // What the interceptors answered with is the call's, as connect-es copies it: headers now, trailers at the end.
      copyHeaders(response.header, context.responseHeader);
      const serializer = serialization.getO(wire.binary);
      for await (const item of response.message) {
        if (res.destroyed || res.writableEnded) break; // the client went away: the method's stream is closed
        const message = isMessage(item, output) ? item : create(output, item as never);
        // A message whose bytes are known (one event for many watchers) is framed once for all of them.
        const known = wire.binary && compression === null ? knownEncoding(message) : undefined;
        if (known !== undefined) {
          withinWriteLimit(known, options.writeMaxBytes);
          head();
          await writeWaiting(res, sharedFrame(known));
          continue;
        }
        let bytes = serializer.serialize(message);
        let flags = 0;
        if (compression !== null && bytes.byteLength >= options.compressMinBytes) {
          bytes = await compression.compress(bytes);
          flags = 1;
        }
        head();
        await writeWaiting(res, frame(flags, bytes));
      }
      copyHeaders(response.trailer, context.responseTrailer);
      // A deadline that passed while the method was still answering ends the call as one.
      const reason: unknown = call.reason;
      if (reason instanceof ConnectError && reason.code === Code.DeadlineExceeded) failure = reason;
    } catch (error) {
      failure = failureOf(error);
    } finally {
      call.release();
    }
    recordOutcome(status, failure);
    if (res.destroyed || res.writableEnded) return;
    head();
    if (wire.grpc) {
      addGrpcTrailers(res, context, failure);
      res.end();
    } else {
      res.end(frame(endStreamFlag, endStream.serialize({ metadata: context.responseTrailer, error: failure })));
    }
  };

  // Every streaming request message, gRPC or Connect, comes in a frame.
  return shortEntry(options, streamWireOf, () => true, answer);
}
