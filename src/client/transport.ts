// Transports for talking to a Synapse server in any of its protocols.
import type { Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { untrustedCertificates } from "./tls-errors.js";
import { refusedStreamsAreUnavailable } from "./refused-streams.js";

/** The RPC protocols every Synapse server speaks on one port. */
export type ProtocolName = "connect" | "grpc" | "grpc-web";

export const PROTOCOLS: readonly ProtocolName[] = ["connect", "grpc", "grpc-web"];

/** How a client calls: protocol, encoding, HTTP version, TLS trust. */
export interface TransportOptions {
  /** Default `"connect"`. */
  protocol?: ProtocolName;
  /** Binary protobuf instead of JSON (Connect and gRPC-web only; gRPC is always binary). */
  binary?: boolean;
  /** Defaults: HTTP/2 for gRPC and https URLs, HTTP/1.1 otherwise. */
  httpVersion?: "1.1" | "2";
  /** Extra CA certificates (PEM) to trust for https URLs (beside Node's own and `NODE_EXTRA_CA_CERTS`). */
  ca?: string | Buffer;
}

export function createTransport(baseUrl: string, options: TransportOptions = {}): Transport {
  const protocol = options.protocol ?? "connect";
  const nodeOptions = options.ca ? { ca: options.ca } : undefined;
  const httpVersion = options.httpVersion ?? (baseUrl.startsWith("https:") ? "2" : "1.1");
  // An untrusted certificate and a refused HTTP/2 stream are UNAVAILABLE (with a hint / safe to retry), not INTERNAL.
  const interceptors = [untrustedCertificates, refusedStreamsAreUnavailable];
  switch (protocol) {
    case "grpc":
      return createGrpcTransport({ baseUrl, nodeOptions, interceptors });
    case "grpc-web":
      return createGrpcWebTransport({ baseUrl, httpVersion, useBinaryFormat: options.binary ?? true, nodeOptions, interceptors });
    case "connect":
      return createConnectTransport({ baseUrl, httpVersion, useBinaryFormat: options.binary ?? false, nodeOptions, interceptors });
  }
}

export function parseProtocol(value: string | undefined): ProtocolName | undefined {
  if (value === undefined) return undefined;
  if ((PROTOCOLS as readonly string[]).includes(value)) return value as ProtocolName;
  throw new TypeError(`protocol must be one of ${PROTOCOLS.join(", ")}`);
}
