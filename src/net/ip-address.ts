// IP addresses and CIDR blocks as numbers, so that every spelling of an
// address (IPv4-mapped IPv6, "::" compression, an embedded dotted quad) is
// compared by value, never by text.
import { isIPv4, isIPv6 } from "node:net";

export interface IpAddress {
  readonly version: 4 | 6;
  /** The address as an unsigned 32- or 128-bit number. */
  readonly value: bigint;
}

export interface CidrBlock {
  readonly version: 4 | 6;
  readonly base: bigint;
  readonly prefix: number;
}

const BITS = { 4: 32, 6: 128 } as const;

/** Strips the brackets a URL puts around an IPv6 literal ("[::1]" to "::1"). */
export function unbracket(host: string): string {
  return host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
}

/** An IP literal (IPv4 dotted quad or IPv6 text), or undefined for anything else (host names included). */
export function parseIp(text: string): IpAddress | undefined {
  const host = unbracket(text);
  if (isIPv4(host)) return { version: 4, value: parseIpv4(host) };
  if (isIPv6(host) && !host.includes("%")) return { version: 6, value: parseIpv6(host) };
  return undefined;
}

function parseIpv4(text: string): bigint {
  return text.split(".").reduce((acc, part) => (acc << 8n) | BigInt(Number(part)), 0n);
}

function parseIpv6(text: string): bigint {
  // A trailing dotted quad ("::ffff:127.0.0.1") is the last two 16-bit words.
  const quad = /:(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  let hex = text;
  if (quad) {
    const v4 = parseIpv4(quad[1]!);
    hex = `${text.slice(0, quad.index)}:${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`;
  }
  const words = (part: string) => (part === "" ? [] : part.split(":").map((w) => BigInt(parseInt(w, 16))));
  const gap = hex.indexOf("::");
  const left = words(gap < 0 ? hex : hex.slice(0, gap));
  const right = gap < 0 ? [] : words(hex.slice(gap + 2));
  const all = [...left, ...new Array<bigint>(8 - left.length - right.length).fill(0n), ...right];
  return all.reduce((acc, word) => (acc << 16n) | word, 0n);
}

/** Canonical text: dotted quad, or RFC 5952 IPv6 (lower case, longest zero run compressed). */
export function formatIp(address: IpAddress): string {
  if (address.version === 4) {
    return [24n, 16n, 8n, 0n].map((shift) => String((address.value >> shift) & 0xffn)).join(".");
  }
  const words = Array.from({ length: 8 }, (_, i) => Number((address.value >> BigInt(112 - 16 * i)) & 0xffffn));
  let best = { start: -1, length: 0 };
  for (let i = 0; i < 8; ) {
    if (words[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > best.length && j - i > 1) best = { start: i, length: j - i };
    i = j;
  }
  const hex = words.map((w) => w.toString(16));
  if (best.start < 0) return hex.join(":");
  return `${hex.slice(0, best.start).join(":")}::${hex.slice(best.start + best.length).join(":")}`;
}

/** "10.0.0.0/8", "fc00::/7", or a bare address (a block of one). */
export function parseCidr(text: string): CidrBlock | undefined {
  const slash = text.indexOf("/");
  const address = parseIp(slash < 0 ? text : text.slice(0, slash));
  if (address === undefined) return undefined;
  const bits = BITS[address.version];
  const prefixText = slash < 0 ? String(bits) : text.slice(slash + 1);
  if (!/^\d{1,3}$/.test(prefixText)) return undefined;
  const prefix = Number(prefixText);
  if (prefix > bits) return undefined;
  return { version: address.version, base: mask(address.value, prefix, bits), prefix };
}

function mask(value: bigint, prefix: number, bits: number): bigint {
  const hostBits = BigInt(bits - prefix);
  return (value >> hostBits) << hostBits;
}

export function inBlock(address: IpAddress, block: CidrBlock): boolean {
  return address.version === block.version && mask(address.value, block.prefix, BITS[block.version]) === block.base;
}

/** The IPv4 address inside an IPv6 one at the given bit offset from the left (mapped, NAT64, 6to4). */
export function embeddedIpv4(address: IpAddress, offsetBits: number): IpAddress {
  return { version: 4, value: (address.value >> BigInt(128 - offsetBits - 32)) & 0xffffffffn };
}
