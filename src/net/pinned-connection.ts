// Connections for outbound calls that go only where the policy allows. An
// IP literal is checked before dialling. A name is dialled with the
// policy's `lookup`, so Node resolves it once per connection, the policy
// checks every address, and the socket connects to one of exactly those
// addresses, while the Host header, TLS SNI and certificate check keep the
// name. Used as the createConnection of an HTTP/1.1 agent and of an HTTP/2
// session, so every connection either kind of client opens goes through it.
import http from "node:http";
import type http2 from "node:http2";
import net from "node:net";
import tls from "node:tls";
import { formatIp, parseIp, unbracket } from "./ip-address.js";
import { OutboundRefusal, type OutboundPolicy } from "./outbound-policy.js";

export type DialOptions = net.TcpNetConnectOpts & tls.ConnectionOptions;

/**
 * Opens a TCP (secure: TLS) socket with Node's connect options. Injectable
 * so that tests see what would be dialled without dialling it.
 */
export type Dialer = (options: DialOptions, secure: boolean) => net.Socket;

export const nodeDialer: Dialer = (options, secure) => (secure ? tls.connect(options) : net.connect(options));

/** A socket that fails with `error` the way an unresolvable name does: before any packet is sent. */
function failedSocket(error: Error): net.Socket {
  // A real socket in the connecting state (not one destroyed at once), so
  // that HTTP/1.1 and HTTP/2 clients report it as they report a DNS failure.
  return net.connect({ host: "refused.invalid", port: 9, lookup: (_host, _options, callback) => callback(error, "") });
}

export function pinnedConnection(policy: OutboundPolicy, options: DialOptions, secure: boolean, dial: Dialer = nodeDialer): net.Socket {
  const host = unbracket(options.host ?? "localhost");
  const literal = parseIp(host);
  if (literal === undefined) return dial({ ...options, host, lookup: policy.lookup }, secure);
  const address = formatIp(literal);
  const verdict = policy.checkAddress(address);
  if (!verdict.allowed) return failedSocket(new OutboundRefusal(address, address, verdict.reason));
  return dial({ ...options, host: address }, secure);
}

/** An HTTP/1.1 agent for http URLs whose every connection is pinned (https goes over HTTP/2). */
export function pinnedAgent(policy: OutboundPolicy, keepAlive: boolean, dial: Dialer = nodeDialer): http.Agent {
  return new (class extends http.Agent {
    override createConnection(options: http.ClientRequestArgs) {
      return pinnedConnection(policy, options as DialOptions, false, dial);
    }
  })({ keepAlive });
}

/** HTTP/2 session options whose connection is pinned (h2c for http, TLS with ALPN h2 for https). */
export function pinnedHttp2Options(policy: OutboundPolicy, secure: boolean, dial: Dialer = nodeDialer): http2.ClientSessionOptions {
  return {
    createConnection: (authority: URL) => {
      const host = unbracket(authority.hostname);
      const port = authority.port === "" ? (secure ? 443 : 80) : Number(authority.port);
      const tlsOptions = secure ? { ALPNProtocols: ["h2"], ...(net.isIP(host) ? {} : { servername: host }) } : {};
      return pinnedConnection(policy, { host, port, ...tlsOptions }, secure, dial);
    },
  };
}
