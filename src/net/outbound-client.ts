// Transports for the calls the server makes to other agents (callbacks,
// registry confirmations): every connection pinned to addresses the
// outbound policy allows, the RPC protocol taken from the URL (or
// negotiated), and failures that say nothing about the target's state.
import type { DescMessage, DescMethodStreaming, DescMethodUnary, MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, type ContextValues, type StreamResponse, type Transport, type UnaryResponse } from "@connectrpc/connect";
import {
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
  Http2SessionManager,
  type GrpcTransportOptions,
} from "@connectrpc/connect-node";
import type http from "node:http";
import type http2 from "node:http2";
import type { ProtocolName } from "../client/transport.js";
import type { Logger } from "../log.js";
import { OutboundRefusal, type OutboundPolicy } from "./outbound-policy.js";
import { parseOutboundUrl, type OutboundTarget } from "./outbound-url.js";
import { nodeDialer, pinnedAgent, pinnedHttp2Options, type Dialer } from "./pinned-connection.js";

/**
 * The one error text for a target that was refused by the policy, could
 * not be resolved or reached, or (opaque transports) answered with anything
 * but success: callers cannot tell an open port from a closed or forbidden one.
 */
export const OUTBOUND_UNREACHABLE = "no agent answered at that address";

export interface OutboundClientOptions {
  policy: OutboundPolicy;
  logger: Logger;
  /** What the call is for, in logs ("callback", "registry confirmation"). */
  purpose: string;
  /**
   * Report every failure as OUTBOUND_UNREACHABLE, also an answer from the
   * target (for a caller who shows the error to whoever chose the URL).
   * Otherwise connection failures and refusals are reported so, and the
   * agent's own RPC errors pass through.
   */
  opaque?: boolean;
  /** Keep connections open for later calls (callbacks); off for one-off calls. */
  keepAlive?: boolean;
  /** Opens sockets; tests pass one that records instead of dialling. */
  dialer?: Dialer;
}

export interface OutboundTransport extends Transport {
  /** The protocol in use: "auto" URLs start with Connect and may move to gRPC. */
  readonly protocol: ProtocolName;
  /** Closes the connections this transport opened. */
  close(): void;
}

const IDLE_CONNECTION_MS = 60_000;

type SessionManager = NonNullable<GrpcTransportOptions["sessionManager"]>;

/** Throws OutboundUrlError when `url` is not an acceptable outbound URL (check it with OutboundPolicy.urlProblem first). */
export function createOutboundTransport(url: string, options: OutboundClientOptions): OutboundTransport {
  return new PolicyTransport(parseOutboundUrl(url), options);
}

class PolicyTransport implements OutboundTransport {
  protocol: ProtocolName;
  private inner?: Transport;
  private agent?: http.Agent;
  private session?: Http2SessionManager;

  constructor(
    private readonly target: OutboundTarget,
    private readonly options: OutboundClientOptions,
  ) {
    this.protocol = target.protocol === "auto" ? "connect" : target.protocol;
  }

  unary<I extends DescMessage, O extends DescMessage>(
    method: DescMethodUnary<I, O>,
    signal: AbortSignal | undefined,
    timeoutMs: number | undefined,
    header: Parameters<Transport["unary"]>[3],
    input: MessageInitShape<I>,
    contextValues?: ContextValues,
  ): Promise<UnaryResponse<I, O>> {
    const attempt = () => this.transport().unary(method, signal, timeoutMs, header, input, contextValues);
    return this.settle(
      attempt().catch((error: unknown) => this.tryGrpc(error, attempt)),
      signal,
    );
  }

  stream<I extends DescMessage, O extends DescMessage>(
    method: DescMethodStreaming<I, O>,
    signal: AbortSignal | undefined,
    timeoutMs: number | undefined,
    header: Parameters<Transport["unary"]>[3],
    input: AsyncIterable<MessageInitShape<I>>,
    contextValues?: ContextValues,
  ): Promise<StreamResponse<I, O>> {
    // No negotiation: a request stream cannot be replayed.
    return this.settle(this.transport().stream(method, signal, timeoutMs, header, input, contextValues), signal);
  }

  close(): void {
    this.agent?.destroy();
    this.session?.abort();
    this.agent = undefined;
    this.session = undefined;
    this.inner = undefined;
  }

  private transport(): Transport {
    this.inner ??= this.build();
    return this.inner;
  }

  private build(): Transport {
    const { baseUrl, secure } = this.target;
    const { policy, keepAlive = false } = this.options;
    const dialer = this.options.dialer ?? nodeDialer;
    const useBinaryFormat = true;
    if (this.protocol === "grpc" || secure) {
      // gRPC needs HTTP/2 (h2c with prior knowledge for http); https offers h2 through ALPN.
      this.session ??= new Http2SessionManager(baseUrl, { idleConnectionTimeoutMs: IDLE_CONNECTION_MS }, pinnedHttp2Options(policy, secure, dialer));
      const common = { baseUrl, httpVersion: "2", sessionManager: guardSessions(this.session), useBinaryFormat } as const;
      if (this.protocol === "grpc") return createGrpcTransport(common);
      return this.protocol === "grpc-web" ? createGrpcWebTransport(common) : createConnectTransport(common);
    }
    this.agent ??= pinnedAgent(policy, keepAlive, dialer);
    const common = { baseUrl, httpVersion: "1.1", nodeOptions: { agent: this.agent }, useBinaryFormat } as const;
    return this.protocol === "grpc-web" ? createGrpcWebTransport(common) : createConnectTransport(common);
  }

  /**
   * For a URL that did not name its protocol: an http endpoint that breaks
   * off an HTTP/1.1 request without an HTTP/1.1 answer (it sends HTTP/2
   * frames, as grpcio does, or resets the connection, as grpc-go does) may
   * speak HTTP/2 only, so the call is made once more with gRPC. gRPC stays
   * in use if a server answered it (a result or a status of its own);
   * otherwise Connect comes back. Safe
   * to repeat for the calls made here: GetCapabilities and
   * GetSupportedInterfaces read, and a pushed event delivered twice is
   * acknowledged again without effect (§5.7).
   */
  private async tryGrpc<T>(error: unknown, attempt: () => Promise<T>): Promise<T> {
    const brokenOff = causes(error).some((cause) => {
      const code = nodeCode(cause);
      return code !== undefined && (code.startsWith("HPE_") || code === "ECONNRESET" || code === "EPIPE");
    });
    if (this.target.protocol !== "auto" || this.target.secure || !brokenOff) throw error;
    // A concurrent call may have switched already; then this one just goes again.
    const switched = this.protocol === "connect";
    if (switched) this.use("grpc");
    try {
      const result = await attempt();
      if (switched) this.options.logger.info({ purpose: this.options.purpose, url: this.target.url }, "the endpoint speaks HTTP/2 only; calling it with gRPC");
      return result;
    } catch (again) {
      if (answeredByServer(again)) throw again;
      // Neither protocol got an answer: report the first failure, and try Connect first next time.
      this.use("connect");
      throw error;
    }
  }

  private use(protocol: ProtocolName): void {
    if (this.protocol === protocol) return;
    this.close();
    this.protocol = protocol;
  }

  private async settle<T>(call: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
    try {
      return await call;
    } catch (error) {
      throw this.failure(error, signal?.aborted === true);
    }
  }

  /** The error the caller sees; the real reason goes to the log. */
  private failure(error: unknown, callerAborted: boolean): ConnectError {
    const { logger, purpose, opaque = false } = this.options;
    const chain = causes(error);
    const fields = { purpose, url: this.target.url, protocol: this.protocol };
    const refusal = chain.find((cause): cause is OutboundRefusal => cause instanceof OutboundRefusal);
    if (refusal !== undefined) {
      logger.warn({ ...fields, host: refusal.host, address: refusal.address, reason: refusal.reason }, "outbound call refused by the outbound policy");
      return new ConnectError(OUTBOUND_UNREACHABLE, Code.Unavailable);
    }
    const connectError = ConnectError.from(error);
    if (callerAborted && !opaque) return connectError;
    const system = chain.map(nodeCode).find((code) => code !== undefined);
    // A stream cancelled by nobody but the connection's end is a connection failure too.
    if (opaque || system !== undefined || connectError.code === Code.Canceled) {
      // Opaque callers hide the reason from the requester, so the operator's log must have it.
      logger[opaque ? "warn" : "info"]({ ...fields, code: Code[connectError.code], cause: system, error: connectError.rawMessage }, "outbound call failed");
      return new ConnectError(OUTBOUND_UNREACHABLE, Code.Unavailable);
    }
    return connectError;
  }
}

/**
 * connect-es may drop its listeners from an HTTP/2 session (closing it,
 * or after a first error) before the session reports a later error, such
 * as a peer that is not HTTP/2 at all; without a listener that error would
 * end the process. Each stream still fails on its own.
 */
function guardSessions(manager: Http2SessionManager): SessionManager {
  const guarded = new WeakSet<http2.Http2Session>();
  return {
    authority: manager.authority,
    async request(method, path, headers, options) {
      const stream = await manager.request(method, path, headers, options);
      const session = stream.session;
      if (session !== undefined && !guarded.has(session)) {
        guarded.add(session);
        session.on("error", () => undefined);
      }
      return stream;
    },
    notifyResponseByteRead: (stream) => manager.notifyResponseByteRead(stream),
  };
}

// Statuses only a server sends: a transport failure is never one of these.
const SERVER_STATUSES = new Set([
  Code.InvalidArgument,
  Code.NotFound,
  Code.AlreadyExists,
  Code.PermissionDenied,
  Code.FailedPrecondition,
  Code.OutOfRange,
  Code.Unimplemented,
  Code.Unauthenticated,
  Code.ResourceExhausted,
]);

function answeredByServer(error: unknown): boolean {
  return SERVER_STATUSES.has(ConnectError.from(error).code) && !causes(error).some((cause) => nodeCode(cause) !== undefined);
}

function causes(error: unknown): unknown[] {
  const chain: unknown[] = [];
  for (let current = error; current !== undefined && !chain.includes(current); current = (current as { cause?: unknown }).cause) {
    chain.push(current);
    if (!(current instanceof Error)) break;
  }
  return chain;
}

/** A Node.js error code ("ECONNREFUSED", "HPE_INVALID_CONSTANT", "ERR_TLS_CERT_ALTNAME_INVALID"). */
function nodeCode(error: unknown): string | undefined {
  const code = error instanceof Error ? (error as { code?: unknown }).code : undefined;
  return typeof code === "string" ? code : undefined;
}
