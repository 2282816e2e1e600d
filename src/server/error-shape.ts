// The last word on every error the server answers with, whoever raised it
// (our code or connect-es reading the request): bounded in size, typed with a
// synapse.v1.ErrorDetail where the caller's request was at fault, and never
// INTERNAL for a request that merely failed to parse.
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { ErrorCode, ErrorDetailSchema, type ErrorDetail } from "../../gen/synapse/v1/errors_pb.js";
import type { Logger } from "../log.js";
import { callAbortKey } from "./call-abort.js";
import { capMessage, detailWithinBounds, errorDetail, protocolError } from "../protocol/errors.js";
import { storeUnavailable, type StoreUnavailableError } from "../store/errors.js";

/** connect-es reports an unparseable binary request like an unparseable response: INTERNAL. */
const PARSE_PREFIX = "parse binary:";
/** Other requests connect-es cannot read, and calls INTERNAL: a compressed flag with no encoding, a body that does not decompress. */
const UNREADABLE = new Set(["received compressed envelope, but do not know how to decompress", "decompression failed"]);
const READ_LIMIT = /larger than configured readMaxBytes (\d+)/;
/** A unary request body with no message or with two: connect-es says UNIMPLEMENTED, but the request is malformed. */
const INPUT_COUNT = /^protocol error: (missing|received extra) input message/;

function firstDetail(error: ConnectError): ErrorDetail | undefined {
  try {
    return error.findDetails(ErrorDetailSchema)[0];
  } catch {
    return undefined; // an undecodable detail is as good as none
  }
}

type Detail = ConnectError["details"][number];

const isErrorDetail = (detail: Detail) => ("desc" in detail ? detail.desc.typeName : detail.type) === ErrorDetailSchema.typeName;
const detailBytes = (detail: Detail) => ("desc" in detail ? toBinary(detail.desc, create(detail.desc, detail.value)).byteLength : detail.value.byteLength);

/** Other details (a ComplianceEvaluation, say) are kept while they fit in this many bytes together. */
const MAX_OTHER_DETAIL_BYTES = 8192;

/** What a caller is told when the state store cannot be used now; the store's own message (where it is, why) is for the logs. */
const UNAVAILABLE_MESSAGES: Record<StoreUnavailableError["reason"], string> = {
  unreachable: "the agent cannot reach its state store now; nothing was done: try again",
  disk_full: "the agent's disk is full; nothing was written: try again later",
};

/**
 * A thrown error as the ConnectError a caller gets: a ConnectError as it is,
 * a store that cannot be used now as agent_not_ready (UNAVAILABLE, safe to
 * retry) with the retry-after the store gave; undefined for anything else
 * (a bug: INTERNAL).
 */
export function asConnectError(error: unknown): ConnectError | undefined {
  if (error instanceof ConnectError) return error;
  const unavailable = storeUnavailable(error);
  if (unavailable === undefined) return undefined;
  return protocolError(ErrorCode.AGENT_NOT_READY, UNAVAILABLE_MESSAGES[unavailable.reason], {
    retryAfterSeconds: unavailable.retryAfterSeconds,
    details: { reason: unavailable.reason },
    cause: error,
  });
}

/** The error as the caller should see it; the same object when nothing needs to change. */
export function shapeError(error: ConnectError): ConnectError {
  let code = error.code;
  let message = error.rawMessage;
  if (code === Code.Internal && message.startsWith(PARSE_PREFIX)) {
    code = Code.InvalidArgument;
    message = `malformed request message: ${message.slice(PARSE_PREFIX.length).trim()}`;
  } else if (code === Code.Internal && UNREADABLE.has(message)) {
    code = Code.InvalidArgument;
    message = `malformed request: ${message}`;
  } else if (code === Code.Unimplemented && INPUT_COUNT.test(message)) {
    code = Code.InvalidArgument;
  }
  const found = firstDetail(error);
  let detail = found;
  const readLimit = READ_LIMIT.exec(message);
  if (detail === undefined && code === Code.ResourceExhausted && readLimit !== null) {
    detail = errorDetail(ErrorCode.MESSAGE_TOO_LARGE, message, { details: { max_bytes: Number(readLimit[1]) } });
  } else if (detail === undefined && code === Code.InvalidArgument) {
    detail = errorDetail(ErrorCode.MESSAGE_FORMAT_INVALID, message);
  } else if (detail !== undefined && !detailWithinBounds(detail)) {
    detail = errorDetail(detail.code, detail.message, { retryAfterSeconds: detail.retryAfterSeconds, missingFields: detail.missingFields, details: detail.details });
  }
  const others = error.details.filter((d) => !isErrorDetail(d));
  let budget = MAX_OTHER_DETAIL_BYTES;
  const kept = others.filter((d) => (budget -= detailBytes(d)) >= 0);
  const capped = capMessage(message);
  const sameDetails = detail === found && kept.length === others.length && error.details.length === others.length + (found ? 1 : 0);
  if (code === error.code && capped === error.rawMessage && sameDetails) return error;
  const shaped = new ConnectError(capped, code, error.metadata, detail ? [{ desc: ErrorDetailSchema, value: detail }] : [], error.cause);
  shaped.details.push(...kept);
  return shaped;
}

/**
 * Shapes every error thrown inside the interceptor chain: handler errors,
 * errors a stream throws as it goes, and for streaming methods also errors
 * reading the request. A non-ConnectError is a bug: it is logged, and
 * connect-es answers it with INTERNAL. A stream its method ends after the
 * call's deadline passed ends as DEADLINE_EXCEEDED (connect-es would report
 * a success); the short path does the same itself (server-stream.ts).
 */
export function shapeErrors(logger: Logger): Interceptor {
  return (next) => async (req) => {
    const procedure = `${req.service.typeName}/${req.method.name}`;
    const shape = (error: unknown): unknown => {
      const known = asConnectError(error);
      if (known !== undefined) return shapeError(known);
      logger.error({ err: error, procedure }, "unexpected error in a handler");
      return error;
    };
    try {
      const res = await next(req);
      if (!res.stream) return res;
      const deadline = req.contextValues.get(callAbortKey) === undefined ? req.signal : undefined;
      return { ...res, message: shapingErrors(res.message, shape, deadline) };
    } catch (error) {
      throw shape(error);
    }
  };
}

/** The deadline's error, when `signal` was aborted by the call's deadline. */
function deadlinePassed(signal: AbortSignal): ConnectError | undefined {
  const reason: unknown = signal.aborted ? signal.reason : undefined;
  return reason instanceof ConnectError && reason.code === Code.DeadlineExceeded ? reason : undefined;
}

/**
 * The stream's messages, with whatever it throws shaped. A plain iterator
 * rather than an async generator, with its methods on a prototype: a watch
 * with many streams open pays for each step on every event, and holds the
 * iterator for as long as it lasts.
 */
function shapingErrors<T>(messages: AsyncIterable<T>, shape: (error: unknown) => unknown, deadline: AbortSignal | undefined): AsyncIterable<T> {
  return { [Symbol.asyncIterator]: () => new ShapingIterator(messages[Symbol.asyncIterator](), shape, deadline) };
}

class ShapingIterator<T> implements AsyncIterator<T> {
  /** A step that rejects, rejects with the shaped error. */
  private readonly reshape: (error: unknown) => Promise<never>;
  /** The last step, when the call's deadline passed: the deadline's error instead (standard path only). */
  private readonly ended: ((result: IteratorResult<T>) => IteratorResult<T>) | undefined;

  constructor(
    private readonly inner: AsyncIterator<T>,
    shape: (error: unknown) => unknown,
    deadline: AbortSignal | undefined,
  ) {
    this.reshape = (error) => Promise.reject(shape(error));
    if (deadline !== undefined) {
      this.ended = (result) => {
        const passed = result.done === true ? deadlinePassed(deadline) : undefined;
        if (passed !== undefined) throw passed;
        return result;
      };
    }
  }

  next(): Promise<IteratorResult<T>> {
    try {
      return this.inner.next().then(this.ended, this.reshape);
    } catch (error) {
      return this.reshape(error); // a step that throws at once
    }
  }

  return(value?: unknown): Promise<IteratorResult<T>> {
    try {
      return (this.inner.return ? this.inner.return(value) : Promise.resolve({ done: true as const, value: value as T })).then(undefined, this.reshape);
    } catch (error) {
      return this.reshape(error);
    }
  }

  throw(error?: unknown): Promise<IteratorResult<T>> {
    try {
      return (this.inner.throw ? this.inner.throw(error) : Promise.reject(error)).then(undefined, this.reshape);
    } catch (thrown) {
      return this.reshape(thrown);
    }
  }
}
