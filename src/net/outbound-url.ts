// The URLs the server calls out to (a requester's callback_url, a
// registering agent's endpoint_url): http or https base URLs, no
// credentials, no query; the fragment may say which RPC protocol the agent
// there speaks (docs/PROTOCOL.md §1.1), since a fragment is never sent:
//
//   http://agent.example:8080                 Connect, gRPC as a fallback (see OutboundProtocol)
//   http://agent.example:50051#protocol=grpc  gRPC (h2c; h2 for https)
//
// Parsing is WHATWG URL parsing, the same Node's HTTP client does, so
// "http://2130706433/" is 127.0.0.1 here exactly as it is when connecting.
import { formatIp, parseIp, unbracket } from "./ip-address.js";

/**
 * How to call the agent: "auto" (no fragment) is Connect binary, over
 * HTTP/1.1 for http and HTTP/2 for https, switching to gRPC when an http
 * endpoint answers HTTP/1.1 with something that is not HTTP/1.1 (a
 * gRPC-only server speaking HTTP/2).
 */
export type OutboundProtocol = "auto" | "connect" | "grpc" | "grpc-web";

export const EXPLICIT_PROTOCOLS: readonly OutboundProtocol[] = ["connect", "grpc", "grpc-web"];

/** Longer URLs are refused, so error messages that quote one stay short. */
export const MAX_OUTBOUND_URL_LENGTH = 2048;

export interface OutboundTarget {
  /** The URL as given. */
  readonly url: string;
  /** What RPC paths are appended to: scheme, host, port and path, without the fragment. */
  readonly baseUrl: string;
  readonly secure: boolean;
  /** The host without brackets: a lower-case name or a canonical IP literal. */
  readonly host: string;
  readonly port: number;
  readonly protocol: OutboundProtocol;
}

export class OutboundUrlError extends Error {}

/** Parses and checks an outbound URL's form (not whether the policy allows its host). */
export function parseOutboundUrl(raw: string): OutboundTarget {
  if (raw.length > MAX_OUTBOUND_URL_LENGTH) throw new OutboundUrlError(`is longer than ${MAX_OUTBOUND_URL_LENGTH} characters`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new OutboundUrlError("is not a URL");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new OutboundUrlError("is not an http or https URL");
  if (url.username !== "" || url.password !== "") throw new OutboundUrlError("must not carry credentials (user:password@)");
  if (url.search !== "") throw new OutboundUrlError("must not have a query: it is a base URL that RPC paths are appended to");
  const protocol = fragmentProtocol(url.hash);
  const secure = url.protocol === "https:";
  const bare = unbracket(url.hostname);
  const ip = parseIp(bare);
  const host = ip ? formatIp(ip) : bare.toLowerCase();
  const port = url.port === "" ? (secure ? 443 : 80) : Number(url.port);
  if (port === 0) throw new OutboundUrlError("names port 0");
  const path = url.pathname.replace(/\/+$/, "");
  return { url: raw, baseUrl: `${url.protocol}//${url.host}${path}`, secure, host, port, protocol };
}

function fragmentProtocol(hash: string): OutboundProtocol {
  if (hash === "" || hash === "#") return "auto";
  const match = /^#protocol=([a-z-]+)$/.exec(hash);
  const protocol = match?.[1] as OutboundProtocol | undefined;
  if (protocol === undefined || !EXPLICIT_PROTOCOLS.includes(protocol)) {
    throw new OutboundUrlError(`has an unknown fragment ${JSON.stringify(hash.slice(0, 40))}: only #protocol=${EXPLICIT_PROTOCOLS.join("|")} is understood`);
  }
  return protocol;
}

/** The problem with an outbound URL's form, as the end of a sentence ("is not an http or https URL"), or undefined. */
export function outboundUrlProblem(raw: string): string | undefined {
  try {
    parseOutboundUrl(raw);
    return undefined;
  } catch (error) {
    if (error instanceof OutboundUrlError) return error.message;
    throw error;
  }
}
