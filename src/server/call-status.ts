// Reads the final status of a call from the response the protocol handler
// produced, for the request log: every protocol spells it differently
// (gRPC in trailers, gRPC-web in a trailer frame, Connect in the HTTP status
// and JSON error body, or in the end-of-stream frame). The short paths record
// the same status themselves (recordOutcome in short-call.ts).
import { Code, ConnectError, createContextKey } from "@connectrpc/connect";
import type { UniversalServerResponse } from "@connectrpc/connect/protocol";
import { errorFromJson } from "@connectrpc/connect/protocol-connect";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import type { Header } from "../../gen/synapse/v1/envelope_pb.js";
import { ErrorDetailSchema, type ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import type { TaskState } from "../../gen/synapse/v1/payloads_pb.js";

export interface CallStatus {
  /** undefined while the call runs; null for OK. */
  code?: Code | null;
  message?: string;
  /** The RPC's path ("/synapse.v1.P2PService/Send") when the request was for one; set by the adapter. */
  procedure?: string;
  /** The protocol error code of a refusal that carried a synapse.v1.ErrorDetail. */
  refusal?: ErrorCode;
  /** The verified message a Send carried (set by the service), for the call's log line. */
  envelope?: Header;
  /** The state of that message's task after it. */
  taskState?: TaskState;
}

/** The call's status record, for the services (HandlerContext.values). */
export const callStatusKey = createContextKey<CallStatus | undefined>(undefined, { description: "synapse call status" });

/** The protocol error code an error's synapse.v1.ErrorDetail carries, if it has one. */
export function refusalOf(error: ConnectError): ErrorCode | undefined {
  try {
    return error.findDetails(ErrorDetailSchema)[0]?.code;
  } catch {
    return undefined; // an undecodable detail names no code
  }
}

const connectCodes: Record<string, Code> = Object.fromEntries(
  Object.entries(Code)
    .filter(([, value]) => typeof value === "number")
    .map(([name, value]) => [name.replace(/[A-Z]/g, (c, i: number) => (i === 0 ? c.toLowerCase() : `_${c.toLowerCase()}`)), value as Code]),
);

/** Names by code, made once: the names are the same strings every time (metrics key their cells by them). */
const codeNames = new Map(Object.entries(connectCodes).map(([name, value]) => [value, name]));

export function codeName(code: Code | null | undefined): string {
  if (code === null || code === undefined) return "ok";
  return codeNames.get(code) ?? `code_${code}`;
}

function decodeGrpcMessage(value: string | null | undefined): string | undefined {
  if (!value) return undefined;
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

function fromGrpcHeaders(headers: Headers | undefined, status: CallStatus): boolean {
  const value = headers?.get("grpc-status");
  if (value === null || value === undefined) return false;
  const code = Number(value);
  status.code = code === 0 ? null : (code as Code);
  status.message = decodeGrpcMessage(headers?.get("grpc-message"));
  if (code !== 0 && headers?.has("grpc-status-details-bin")) {
    try {
      const error = findTrailerError(headers);
      if (error !== undefined) status.refusal = refusalOf(error);
    } catch {
      // details that do not decode name no code
    }
  }
  return true;
}

/** Splits a byte stream into enveloped frames (flag byte, 32-bit length, data). */
class FrameReader {
  private buffer = new Uint8Array(0);
  constructor(private readonly onFrame: (flags: number, data: Uint8Array) => void) {}
  push(chunk: Uint8Array): void {
    const merged = new Uint8Array(this.buffer.byteLength + chunk.byteLength);
    merged.set(this.buffer, 0);
    merged.set(chunk, this.buffer.byteLength);
    let offset = 0;
    while (merged.byteLength - offset >= 5) {
      const length = new DataView(merged.buffer, merged.byteOffset + offset + 1, 4).getUint32(0);
      if (merged.byteLength - offset - 5 < length) break;
      this.onFrame(merged[offset]!, merged.subarray(offset + 5, offset + 5 + length));
      offset += 5 + length;
    }
    // Keep only an unfinished frame's bytes; message bodies are not retained.
    this.buffer = merged.slice(offset);
  }
}

const decoder = new TextDecoder();
const MAX_TRAILER_BYTES = 1 << 20;

/** A trailer frame's text; compressed (flag 0x01) with the response's grpc-encoding when the trailer is large. */
function trailerText(flags: number, data: Uint8Array, encoding: string | null | undefined): string {
  if ((flags & 0x01) === 0) return decoder.decode(data);
  const options = { maxOutputLength: MAX_TRAILER_BYTES };
  if (encoding === "gzip") return decoder.decode(gunzipSync(data, options));
  if (encoding === "br") return decoder.decode(brotliDecompressSync(data, options));
  return "";
}

function parseGrpcWebTrailer(text: string, status: CallStatus): void {
  const headers = new Headers();
  for (const line of text.split(/\r?\n/)) {
    const colon = line.indexOf(":");
    // Header values are Latin-1; anything else is not a status we can read.
    if (colon > 0 && !/[^\x00-\xff]/.test(line)) headers.set(line.slice(0, colon).trim(), line.slice(colon + 1).trim());
  }
  fromGrpcHeaders(headers, status);
}

function parseConnectError(text: string, status: CallStatus, httpStatus: number): void {
  try {
    const parsed = JSON.parse(text) as { code?: string; message?: string; details?: unknown; error?: { code?: string; message?: string; details?: unknown } };
    const error = parsed.error ?? (httpStatus === 200 ? undefined : parsed);
    if (error === undefined) {
      status.code = null;
      return;
    }
    status.code = connectCodes[error.code ?? ""] ?? Code.Unknown;
    status.message = error.message;
    if (Array.isArray(error.details) && error.details.length > 0) {
      try {
        status.refusal = refusalOf(errorFromJson(error as never, undefined, new ConnectError("", Code.Unknown)));
      } catch {
        // details that do not decode name no code
      }
    }
  } catch {
    status.code = httpStatus === 200 ? null : Code.Unknown;
  }
}

async function* watch(
  body: AsyncIterable<Uint8Array>,
  onChunk: (chunk: Uint8Array) => void,
  onEnd: () => void,
): AsyncIterable<Uint8Array> {
  for await (const chunk of body) {
    onChunk(chunk);
    yield chunk;
  }
  onEnd();
}

/** Returns the same response, observed: `status` is filled in as the body is written. */
export function observeStatus(contentType: string, response: UniversalServerResponse, status: CallStatus): UniversalServerResponse {
  const body = response.body;
  if (contentType.startsWith("application/grpc-web")) {
    if (body === undefined) return response;
    const encoding = response.header?.get("grpc-encoding");
    const frames = new FrameReader((flags, data) => {
      if (!(flags & 0x80)) return;
      // Observing must never break the response it observes.
      try {
        parseGrpcWebTrailer(trailerText(flags, data, encoding), status);
      } catch {
        status.code ??= Code.Unknown;
      }
    });
    return { ...response, body: watch(body, (chunk) => frames.push(chunk), () => (status.code ??= null)) };
  }
  if (contentType.startsWith("application/grpc")) {
    if (fromGrpcHeaders(response.header, status) || body === undefined) return response;
    return { ...response, body: watch(body, () => undefined, () => fromGrpcHeaders(response.trailer, status) || (status.code ??= null)) };
  }
  if (contentType.startsWith("application/connect+")) {
    if (response.status !== 200 || body === undefined) {
      status.code = Code.Unknown;
      return response;
    }
    const frames = new FrameReader((flags, data) => {
      if (flags & 0x02) parseConnectError(decoder.decode(data), status, 200);
    });
    return { ...response, body: watch(body, (chunk) => frames.push(chunk), () => (status.code ??= null)) };
  }
  // Connect unary (and GET): success is HTTP 200; errors are a small JSON body.
  if (response.status === 200 || body === undefined || response.header?.get("content-encoding")) {
    status.code = response.status === 200 ? null : Code.Unknown;
    return response;
  }
  const parts: Uint8Array[] = [];
  return {
    ...response,
    body: watch(body, (chunk) => parts.push(chunk), () => parseConnectError(decoder.decode(Buffer.concat(parts)), status, response.status)),
  };
}
