// The four wire protocols a client can speak to the one port, as connect-es
// transports over real sockets, and a helper that reads a refusal.
import type { DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client, type Transport } from "@connectrpc/connect";
import { compressionGzip, createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import type { ErrorDetail } from "../../gen/synapse/v1/errors_pb.js";
import { findErrorDetail } from "../../src/protocol/errors.js";

export interface Protocol {
  name: string;
  json: boolean;
  transport(baseUrl: string, options?: { gzip?: boolean }): Transport;
}

const compression = (gzip?: boolean) => (gzip ? { sendCompression: compressionGzip, compressMinBytes: 0 } : {});

export const PROTOCOLS: Protocol[] = [
  { name: "Connect JSON", json: true, transport: (baseUrl, o = {}) => createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: false, ...compression(o.gzip) }) },
  { name: "Connect binary", json: false, transport: (baseUrl, o = {}) => createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: true, ...compression(o.gzip) }) },
  { name: "gRPC", json: false, transport: (baseUrl, o = {}) => createGrpcTransport({ baseUrl, ...compression(o.gzip) }) },
  { name: "gRPC-web", json: false, transport: (baseUrl, o = {}) => createGrpcWebTransport({ baseUrl, httpVersion: "1.1", ...compression(o.gzip) }) },
];

export function clientFor<S extends DescService>(service: S, protocol: Protocol, baseUrl: string, options?: { gzip?: boolean }): Client<S> {
  return createClient(service, protocol.transport(baseUrl, options));
}

export interface Refusal {
  code: Code;
  message: string;
  detail?: ErrorDetail;
  protocolCode?: string;
}

/** The refusal an attempt ends with; fails the test if it succeeds. */
export async function refusal(attempt: Promise<unknown> | AsyncIterable<unknown>): Promise<Refusal> {
  let error: unknown;
  try {
    if (Symbol.asyncIterator in attempt) {
      for await (const _ of attempt);
    } else await attempt;
  } catch (e) {
    error = e;
  }
  if (error === undefined) throw new Error("expected a refusal, got an answer");
  const connectError = ConnectError.from(error);
  const detail = findErrorDetail(connectError);
  return { code: connectError.code, message: connectError.rawMessage, detail, protocolCode: detail?.protocolCode };
}
