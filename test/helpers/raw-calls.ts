// Calls made by hand over real sockets, for tests that look at the wire: the
// status, headers, trailers and body bytes exactly as the server sent them.
import http from "node:http";
import http2 from "node:http2";

/** One enveloped message: the flags byte, the 32-bit length, the data. */
export function frame(flags: number, data: Uint8Array): Buffer {
  const head = Buffer.from([flags, 0, 0, 0, 0]);
  head.writeUInt32BE(data.byteLength, 1);
  return Buffer.concat([head, data]);
}

/** The frames of a body, [flags, data] each; a cut-off last frame is left out. */
export function frames(body: Buffer): Array<[number, Buffer]> {
  const out: Array<[number, Buffer]> = [];
  for (let at = 0; at + 5 <= body.byteLength; ) {
    const size = body.readUInt32BE(at + 1);
    out.push([body[at]!, body.subarray(at + 5, at + 5 + size)]);
    at += 5 + size;
  }
  return out;
}

export interface RawAnswer {
  status: number;
  /** Response headers (HTTP/2 pseudo-headers and the date left out). */
  headers: Record<string, string>;
  /** HTTP/2 trailers (empty when none came). */
  trailers: Record<string, string>;
  body: Buffer;
  ms: number;
}

export interface RawRequest {
  method?: string;
  headers?: Record<string, string>;
  body?: Buffer | string;
  /** Called once the request is under way (to reset it, say). */
  onStart?: (cancel: () => void) => void;
}

function plain(headers: http.IncomingHttpHeaders | http2.IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(headers)) {
    if (key.startsWith(":") || key === "date" || value === undefined) continue;
    out[key] = Array.isArray(value) ? value.join(", ") : String(value);
  }
  return out;
}

/** One call over HTTP/2 on `session`. Resolves when the stream closes, however it closes. */
export function h2Call(session: http2.ClientHttp2Session, path: string, request: RawRequest = {}): Promise<RawAnswer> {
  const started = performance.now();
  return new Promise((resolve) => {
    const stream = session.request({ ":method": request.method ?? "POST", ":path": path, te: "trailers", ...request.headers });
    const answer: RawAnswer = { status: 0, headers: {}, trailers: {}, body: Buffer.alloc(0), ms: 0 };
    const chunks: Buffer[] = [];
    stream.on("response", (headers) => {
      answer.status = Number(headers[":status"]);
      answer.headers = plain(headers);
    });
    stream.on("trailers", (trailers) => (answer.trailers = plain(trailers)));
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.on("error", () => undefined); // a reset: the answer says what arrived
    stream.on("close", () => resolve({ ...answer, body: Buffer.concat(chunks), ms: performance.now() - started }));
    stream.end(request.body);
    request.onStart?.(() => stream.close(http2.constants.NGHTTP2_CANCEL));
  });
}

/** One call over HTTP/1.1 to `baseUrl` + `path`. */
export function h1Call(baseUrl: string, path: string, request: RawRequest = {}): Promise<RawAnswer> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request(`${baseUrl}${path}`, { method: request.method ?? "POST", headers: request.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () => resolve({ status: res.statusCode!, headers: plain(res.headers), trailers: plain(res.trailers), body: Buffer.concat(chunks), ms: performance.now() - started }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(request.body);
    request.onStart?.(() => req.destroy());
  });
}

/** A gRPC call's status: from its trailers, or from the headers of a trailers-only answer. */
export const grpcStatus = (answer: RawAnswer) => answer.trailers["grpc-status"] ?? answer.headers["grpc-status"];
