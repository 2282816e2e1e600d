// What kind of destination an IP address is: the IANA special-purpose
// registries (IPv4 and IPv6) condensed into the classes the outbound policy
// decides on. Anything not listed is public. IPv6 addresses that carry an
// IPv4 address (mapped, NAT64, 6to4) are judged by the address they carry.
import { embeddedIpv4, inBlock, parseCidr, type CidrBlock, type IpAddress } from "./ip-address.js";

export type AddressKind = "public" | "loopback" | "private" | "link-local" | "multicast" | "unspecified" | "broadcast" | "reserved";

export interface AddressClass {
  readonly kind: AddressKind;
  /** The special-purpose block it falls in, for logs ("169.254.0.0/16 link-local"). */
  readonly range?: string;
}

interface Special {
  block: CidrBlock;
  kind: AddressKind;
  name: string;
}

function table(rows: [string, AddressKind, string][]): Special[] {
  return rows.map(([cidr, kind, name]) => ({ block: parseCidr(cidr)!, kind, name: `${cidr} ${name}` }));
}

// First match wins, so narrower blocks come before the blocks that contain them.
const IPV4 = table([
  ["0.0.0.0/8", "unspecified", "this network"],
  ["10.0.0.0/8", "private", "private-use (RFC 1918)"],
  ["100.64.0.0/10", "private", "shared address space (CGNAT, RFC 6598)"],
  ["127.0.0.0/8", "loopback", "loopback"],
  ["169.254.0.0/16", "link-local", "link-local"],
  ["172.16.0.0/12", "private", "private-use (RFC 1918)"],
  ["192.0.0.0/24", "reserved", "IETF protocol assignments"],
  ["192.0.2.0/24", "reserved", "documentation (TEST-NET-1)"],
  ["192.88.99.0/24", "reserved", "6to4 relay anycast"],
  ["192.168.0.0/16", "private", "private-use (RFC 1918)"],
  ["198.18.0.0/15", "reserved", "benchmarking"],
  ["198.51.100.0/24", "reserved", "documentation (TEST-NET-2)"],
  ["203.0.113.0/24", "reserved", "documentation (TEST-NET-3)"],
  ["224.0.0.0/4", "multicast", "multicast"],
  ["255.255.255.255/32", "broadcast", "limited broadcast"],
  ["240.0.0.0/4", "reserved", "reserved for future use"],
]);

const IPV6 = table([
  ["::/128", "unspecified", "unspecified"],
  ["::1/128", "loopback", "loopback"],
  ["64:ff9b:1::/48", "private", "local-use IPv4/IPv6 translation"],
  ["2001::/32", "reserved", "Teredo"],
  ["2001:db8::/32", "reserved", "documentation"],
  ["2001::/23", "reserved", "IETF protocol assignments"],
  ["3fff::/20", "reserved", "documentation"],
  ["fc00::/7", "private", "unique local (ULA)"],
  ["fe80::/10", "link-local", "link-local"],
  ["fec0::/10", "private", "site-local (deprecated)"],
  ["ff00::/8", "multicast", "multicast"],
]);

const MAPPED = parseCidr("::ffff:0:0/96")!;
const NAT64 = parseCidr("64:ff9b::/96")!;
const SIX_TO_FOUR = parseCidr("2002::/16")!;
// Global unicast; everything else in IPv6 is reserved or special.
const GLOBAL_UNICAST = parseCidr("2000::/3")!;

export function classifyAddress(address: IpAddress): AddressClass {
  if (address.version === 4) {
    const special = IPV4.find((row) => inBlock(address, row.block));
    return special ? { kind: special.kind, range: special.name } : { kind: "public" };
  }
  // An IPv4-mapped address is that IPv4 address on this host's own stack.
  if (inBlock(address, MAPPED)) return classifyAddress(embeddedIpv4(address, 96));
  // Translated addresses reach their IPv4 address through a gateway: public
  // when it is public, refused (never "our" loopback) when it is special.
  for (const [block, offset, name] of [
    [NAT64, 96, "64:ff9b::/96 NAT64"],
    [SIX_TO_FOUR, 16, "2002::/16 6to4"],
  ] as const) {
    if (!inBlock(address, block)) continue;
    const inner = classifyAddress(embeddedIpv4(address, offset));
    return inner.kind === "public" ? inner : { kind: "reserved", range: `${name} of ${inner.range ?? inner.kind}` };
  }
  const special = IPV6.find((row) => inBlock(address, row.block));
  if (special) return { kind: special.kind, range: special.name };
  if (!inBlock(address, GLOBAL_UNICAST)) return { kind: "reserved", range: "outside 2000::/3 global unicast" };
  return { kind: "public" };
}

/** The IPv4 address an IPv4-mapped IPv6 address stands for; the address itself otherwise. */
export function unmapped(address: IpAddress): IpAddress {
  return address.version === 6 && inBlock(address, MAPPED) ? embeddedIpv4(address, 96) : address;
}
