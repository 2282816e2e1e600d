// Name resolution for outbound calls, injectable so that tests can make any
// name resolve to any address (including ones that must never be dialled).
import { lookup } from "node:dns/promises";

export interface ResolvedAddress {
  readonly address: string;
  readonly family: 4 | 6;
}

/** Every address a host name resolves to, in the order to try them. */
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

/** The system resolver (getaddrinfo: /etc/hosts, then DNS), as Node's own connections use it. */
export const systemResolver: Resolver = async (hostname) => {
  const addresses = await lookup(hostname, { all: true, verbatim: true });
  return addresses.map(({ address, family }) => ({ address, family: family === 6 ? 6 : 4 }));
};
