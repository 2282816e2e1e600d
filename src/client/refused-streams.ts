// A server that is shutting down resets the HTTP/2 streams it will not serve
// with REFUSED_STREAM, which promises that nothing of the call was processed
// (RFC 9113 §8.7). Node reports such a reset as an ERR_HTTP2_STREAM_ERROR,
// which connect-node turns into INTERNAL; this interceptor makes it
// UNAVAILABLE, the code that says the call may be made again.
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";

const REFUSED_STREAM = /\bNGHTTP2_REFUSED_STREAM\b/;

/** True when the error, or one of its causes, is an HTTP/2 stream the peer refused. */
export function isRefusedStream(error: unknown): boolean {
  let cause = error;
  for (let depth = 0; cause instanceof Error && depth < 8; depth++) {
    if ((cause as { code?: unknown }).code === "ERR_HTTP2_STREAM_ERROR" && REFUSED_STREAM.test(cause.message)) return true;
    cause = cause.cause;
  }
  return false;
}

function classified(error: unknown): unknown {
  if (!isRefusedStream(error)) return error;
  const connectError = ConnectError.from(error);
  if (connectError.code === Code.Unavailable) return connectError;
  return new ConnectError("the server refused the call before processing it (HTTP/2 REFUSED_STREAM); it may be made again", Code.Unavailable, connectError.metadata, undefined, error);
}

async function* classifiedMessages<T>(messages: AsyncIterable<T>): AsyncIterable<T> {
  try {
    yield* messages;
  } catch (error) {
    throw classified(error);
  }
}

/** Refused HTTP/2 streams fail with UNAVAILABLE, for unary and streaming calls alike. */
export const refusedStreamsAreUnavailable: Interceptor = (next) => async (request) => {
  try {
    const response = await next(request);
    return response.stream ? { ...response, message: classifiedMessages(response.message) } : response;
  } catch (error) {
    throw classified(error);
  }
};
