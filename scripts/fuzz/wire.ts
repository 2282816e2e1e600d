// Raw HTTP/1.1 and HTTP/2 clients that send exactly the bytes they are given
// and read back how the call ended, whatever the protocol: an RPC status (and
// whether it carries a synapse.v1.ErrorDetail), a bare HTTP status, a reset
// (the stream or connection ended with no status), or a hang.
import { Code } from "@connectrpc/connect";
import { codeFromString } from "@connectrpc/connect/protocol-connect";
import http from "node:http";
import http2 from "node:http2";
import { brotliDecompressSync, gunzipSync } from "node:zlib";

export interface RawRequest {
  http2: boolean;
  method: string;
  /** Path and query. */
  path: string;
  headers: Record<string, string>;
  body: Uint8Array;
  /** A live stream (Watch): one message is answer enough, then the call is cancelled. */
  firstMessageEnough?: boolean;
}

export type Outcome =
  | { kind: "status"; code: Code | 0; typed: boolean; http: number }
  | { kind: "http"; http: number }
  | { kind: "reset"; reason: string }
  | { kind: "hang" };

interface Response {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  trailers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

const MAX_BODY_BYTES = 4 << 20;
const ERROR_DETAIL = Buffer.from("synapse.v1.ErrorDetail");
const first = (value: string | string[] | undefined) => (Array.isArray(value) ? value[0] : value);

/** Frames of an enveloped body (flags, 32-bit length, data); stops at an incomplete one. */
function frames(body: Buffer): Array<{ flags: number; data: Buffer }> {
  const out: Array<{ flags: number; data: Buffer }> = [];
  for (let offset = 0; body.length - offset >= 5; ) {
    const length = body.readUInt32BE(offset + 1);
    if (body.length - offset - 5 < length) break;
    out.push({ flags: body[offset]!, data: body.subarray(offset + 5, offset + 5 + length) });
    offset += 5 + length;
  }
  return out;
}

function inflate(data: Buffer, encoding: string | undefined): Buffer {
  if (encoding === "gzip") return gunzipSync(data, { maxOutputLength: MAX_BODY_BYTES });
  if (encoding === "br") return brotliDecompressSync(data, { maxOutputLength: MAX_BODY_BYTES });
  return data;
}

function grpcStatus(fields: Record<string, string | string[] | undefined>, http: number): Outcome | undefined {
  const value = first(fields["grpc-status"]);
  if (value === undefined) return undefined;
  const details = first(fields["grpc-status-details-bin"]);
  const typed = details !== undefined && Buffer.from(details, "base64").includes(ERROR_DETAIL);
  return { kind: "status", code: Number(value) as Code, typed, http };
}

function connectError(json: string, http: number): Outcome {
  try {
    const parsed = JSON.parse(json) as { code?: string; details?: Array<{ type?: string }> };
    const code = codeFromString(parsed.code ?? "") ?? Code.Unknown;
    return { kind: "status", code, typed: (parsed.details ?? []).some((d) => d.type === "synapse.v1.ErrorDetail"), http };
  } catch {
    return { kind: "status", code: Code.Unknown, typed: false, http };
  }
}

/** How a finished response ended, read the way each protocol spells its status. */
export function classify(res: Response): Outcome {
  const contentType = (first(res.headers["content-type"]) ?? "").toLowerCase();
  const encoding = first(res.headers["grpc-encoding"]) ?? first(res.headers["connect-content-encoding"]);
  if (contentType.startsWith("application/grpc-web")) {
    const trailer = frames(res.body).find((f) => f.flags & 0x80);
    if (trailer !== undefined) {
      const text = inflate(trailer.data, trailer.flags & 1 ? encoding : undefined).toString("latin1");
      const fields = Object.fromEntries(text.split("\r\n").filter((l) => l.includes(":")).map((l) => [l.slice(0, l.indexOf(":")).trim().toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]));
      const status = grpcStatus(fields, res.status);
      if (status) return status;
    }
    return grpcStatus(res.headers, res.status) ?? (res.status === 200 ? { kind: "reset", reason: "gRPC-web body without a status" } : { kind: "http", http: res.status });
  }
  if (contentType.startsWith("application/grpc")) {
    return grpcStatus(res.trailers, res.status) ?? grpcStatus(res.headers, res.status) ?? (res.status === 200 ? { kind: "reset", reason: "gRPC response without grpc-status" } : { kind: "http", http: res.status });
  }
  if (contentType.startsWith("application/connect+")) {
    if (res.status !== 200) return connectError(res.body.toString(), res.status);
    const end = frames(res.body).find((f) => f.flags & 0x02);
    if (end === undefined) return { kind: "reset", reason: "Connect stream without an end-stream message" };
    const json = inflate(end.data, end.flags & 1 ? encoding : undefined).toString();
    const parsed = JSON.parse(json) as { error?: unknown };
    return parsed.error === undefined ? { kind: "status", code: 0, typed: false, http: 200 } : connectError(JSON.stringify(parsed.error), 200);
  }
  if (res.status === 200) return { kind: "status", code: 0, typed: false, http: 200 };
  if (contentType.startsWith("application/json")) {
    return connectError(inflate(res.body, first(res.headers["content-encoding"])).toString(), res.status);
  }
  return { kind: "http", http: res.status };
}

/** True once the body holds one complete message frame (flag 0): a live stream is answering. */
function hasMessage(body: Buffer): boolean {
  return frames(body).some((f) => (f.flags & 0x82) === 0);
}

export class WireClient {
  private session: http2.ClientHttp2Session | undefined;
  private readonly agent: http.Agent;

  constructor(
    private readonly baseUrl: string,
    private readonly timeoutMs: number,
  ) {
    this.agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
  }

  send(request: RawRequest): Promise<Outcome> {
    return request.http2 ? this.sendH2(request) : this.sendH1(request);
  }

  close(): void {
    this.session?.destroy();
    this.agent.destroy();
  }

  private h2Session(): http2.ClientHttp2Session {
    if (this.session === undefined || this.session.closed || this.session.destroyed) {
      // Node's client counts every refused request's unsent body against its session memory
      // (10 MB by default) and then refuses new streams itself: thousands of hostile calls
      // on one connection need more room than that.
      const session = http2.connect(this.baseUrl, { maxSessionMemory: 1024 });
      session.on("error", () => undefined);
      session.on("goaway", () => session.close());
      this.session = session;
    }
    return this.session;
  }

  private sendH2(request: RawRequest): Promise<Outcome> {
    return new Promise((resolve) => {
      const headers: http2.OutgoingHttpHeaders = { ":method": request.method, ":path": request.path, ...request.headers };
      let stream: http2.ClientHttp2Stream;
      try {
        stream = this.h2Session().request(headers, { endStream: request.body.byteLength === 0 });
      } catch (error) {
        resolve({ kind: "reset", reason: `request refused: ${(error as Error).message}` });
        return;
      }
      const res: Response = { status: 0, headers: {}, trailers: {}, body: Buffer.alloc(0) };
      const parts: Buffer[] = [];
      let size = 0;
      let settled = false;
      const finish = (outcome: Outcome) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (!stream.closed) stream.close(http2.constants.NGHTTP2_CANCEL);
        resolve(outcome);
      };
      const timer = setTimeout(() => finish({ kind: "hang" }), this.timeoutMs);
      stream.on("response", (h) => {
        res.status = Number(h[":status"]);
        res.headers = h;
      });
      stream.on("trailers", (t) => (res.trailers = t));
      stream.on("data", (chunk: Buffer) => {
        if (size < MAX_BODY_BYTES) parts.push(chunk);
        size += chunk.length;
        if (request.firstMessageEnough && res.status === 200 && hasMessage(Buffer.concat(parts))) {
          finish({ kind: "status", code: 0, typed: false, http: 200 });
        }
      });
      stream.on("error", () => undefined);
      stream.on("close", () => {
        res.body = Buffer.concat(parts);
        if (res.status === 0) return finish({ kind: "reset", reason: `stream closed (RST ${stream.rstCode}) before a response` });
        const outcome = safeClassify(res);
        // A status that arrived stands, however the stream closed after it.
        if (outcome.kind === "reset" && stream.rstCode !== http2.constants.NGHTTP2_NO_ERROR) {
          return finish({ kind: "reset", reason: `stream reset (RST ${stream.rstCode}) without a status` });
        }
        finish(outcome);
      });
      if (request.body.byteLength > 0) stream.end(request.body);
    });
  }

  private async sendH1(request: RawRequest): Promise<Outcome> {
    const outcome = await this.sendH1Once(request);
    // A kept-alive socket the server closed as it was reused: the request never arrived; send it again.
    if (outcome.kind === "reset" && outcome.reason.startsWith("stale socket")) return this.sendH1Once(request);
    return outcome;
  }

  private sendH1Once(request: RawRequest): Promise<Outcome> {
    return new Promise((resolve) => {
      let settled = false;
      const finish = (outcome: Outcome) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        req.destroy();
        resolve(outcome);
      };
      // Always framed with Content-Length: Node sends a GET's body unframed otherwise, which is
      // broken HTTP, not a hostile RPC (see the report on HTTP/1.1 parse errors).
      const headers = { ...request.headers, "content-length": String(request.body.byteLength) };
      const req = http.request(`${this.baseUrl}${request.path}`, { method: request.method, headers, agent: this.agent }, (response) => {
        const parts: Buffer[] = [];
        let size = 0;
        response.on("data", (chunk: Buffer) => {
          if (size < MAX_BODY_BYTES) parts.push(chunk);
          size += chunk.length;
          if (request.firstMessageEnough && response.statusCode === 200 && hasMessage(Buffer.concat(parts))) {
            finish({ kind: "status", code: 0, typed: false, http: 200 });
          }
        });
        response.on("end", () => finish(safeClassify({ status: response.statusCode ?? 0, headers: response.headers, trailers: response.trailers, body: Buffer.concat(parts) })));
        response.on("error", () => finish({ kind: "reset", reason: "response aborted" }));
      });
      const timer = setTimeout(() => finish({ kind: "hang" }), this.timeoutMs);
      let answered = false;
      req.on("response", () => (answered = true));
      req.on("error", (error) => finish({ kind: "reset", reason: `${req.reusedSocket && !answered ? "stale socket" : "connection"}: ${error.message}` }));
      req.end(request.body);
    });
  }
}

function safeClassify(res: Response): Outcome {
  try {
    return classify(res);
  } catch (error) {
    return { kind: "reset", reason: `unreadable response: ${(error as Error).message}` };
  }
}

/** The name a result is counted under: "ok", a Connect code name ("invalid_argument"), "http_415", "reset", "hang". */
export function outcomeLabel(outcome: Outcome): string {
  if (outcome.kind === "status") return outcome.code === 0 ? "ok" : (Code[outcome.code] ?? `code_${outcome.code}`).replace(/[A-Z]/g, (c, i: number) => (i === 0 ? c.toLowerCase() : `_${c.toLowerCase()}`));
  if (outcome.kind === "http") return `http_${outcome.http}`;
  return outcome.kind;
}

/**
 * What the suite forbids: INTERNAL, UNKNOWN, DATA_LOSS, any HTTP 5xx without a
 * status, a reset, a hang. One 5xx is the protocol's own answer: HTTP 505 to
 * a bidi stream over HTTP/1.1, which the Connect protocol reserves for that.
 */
export function isFailure(outcome: Outcome, bidiOverHttp1 = false): boolean {
  if (outcome.kind === "status") return outcome.code === Code.Internal || outcome.code === Code.Unknown || outcome.code === Code.DataLoss;
  if (outcome.kind === "http") return outcome.http >= 500 && !(outcome.http === 505 && bidiOverHttp1);
  return true;
}
