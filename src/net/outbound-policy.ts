// Where the server may call out to (callbacks, registry confirmations).
// Public addresses are allowed. Loopback is allowed only while every
// listener of this server is bound to loopback (local development).
// Private, link-local, multicast, unspecified, broadcast and the other
// special-purpose ranges (address-class.ts) are refused unless the operator
// lists them (`--allow-outbound CIDR|IP|host|*.domain`). The decision is
// made on every address a name resolves to, at connection time, and the
// connection is then made to exactly those addresses (pinned-connection.ts),
// so a name that resolves differently the second time gains nothing.
import type { LookupAddress, LookupOptions } from "node:dns";
import { classifyAddress, unmapped, type AddressKind } from "./address-class.js";
import { formatIp, inBlock, parseCidr, parseIp, unbracket, type CidrBlock } from "./ip-address.js";
import { outboundUrlProblem, parseOutboundUrl } from "./outbound-url.js";
import { systemResolver, type ResolvedAddress, type Resolver } from "./resolver.js";

export interface OutboundPolicyOptions {
  /** The operator's allow-list: CIDR blocks, IP addresses, host names and "*.domain" wildcards. */
  allow?: readonly string[];
  /**
   * Whether this server listens on loopback only, which allows loopback
   * targets. Normally learnt from the addresses it binds (noteListening);
   * setting it fixes the answer. Until a listener is noted, loopback is refused.
   */
  localOnly?: boolean;
  /** How host names are resolved; the system resolver by default. */
  resolver?: Resolver;
}

export type Verdict = { readonly allowed: true; readonly reason: string } | { readonly allowed: false; readonly reason: string; readonly kind: AddressKind };

/** A refusal by the policy; callers show it exactly like an unreachable target. */
export class OutboundRefusal extends Error {
  constructor(
    readonly host: string,
    readonly address: string,
    readonly reason: string,
  ) {
    super(`outbound call to ${host} (${address}) refused: ${reason}`);
    this.name = "OutboundRefusal";
  }
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

interface AllowList {
  blocks: CidrBlock[];
  names: Set<string>;
  /** ".example.com" for "*.example.com". */
  suffixes: string[];
}

/** Lower case, without the root's trailing dot. */
function normalName(host: string): string {
  return unbracket(host).toLowerCase().replace(/\.$/, "");
}

/** RFC 6761: these names are loopback by definition, whatever a resolver says. */
function isLocalhostName(name: string): boolean {
  return name === "localhost" || name.endsWith(".localhost");
}

/** Parses `--allow-outbound` entries; throws a TypeError naming the first bad one. */
export function parseAllowList(entries: readonly string[]): AllowList {
  const list: AllowList = { blocks: [], names: new Set(), suffixes: [] };
  for (const raw of entries) {
    const entry = raw.trim();
    const block = parseCidr(entry);
    if (block) {
      list.blocks.push(block);
      continue;
    }
    const bad = new TypeError(`--allow-outbound ${JSON.stringify(raw)} is not a CIDR block, IP address, host name or *.domain`);
    // No ports, paths or credentials: a host and nothing else.
    if (!/^(\*\.)?[A-Za-z0-9._-]+$/.test(entry)) throw bad;
    const wildcard = entry.startsWith("*.");
    const name = wildcard ? entry.slice(2) : entry;
    let host: string | undefined;
    try {
      // The WHATWG host parser, as for URLs: "0x7f.1" is 127.0.0.1 here too.
      host = new URL(`http://${name}/`).hostname;
    } catch {
      host = undefined;
    }
    const ip = host === undefined ? undefined : parseIp(host);
    if (ip && !wildcard) {
      list.blocks.push(parseCidr(formatIp(ip))!);
    } else if (host !== undefined && !ip && /^[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?$/.test(host) && normalName(host) === normalName(name)) {
      if (wildcard) list.suffixes.push(`.${normalName(host)}`);
      else list.names.add(normalName(host));
    } else {
      throw bad;
    }
  }
  return list;
}

export class OutboundPolicy {
  private readonly allowList: AllowList;
  private readonly resolver: Resolver;
  private readonly fixedLocalOnly: boolean | undefined;
  private readonly listeners: boolean[] = [];

  constructor(options: OutboundPolicyOptions = {}) {
    this.allowList = parseAllowList(options.allow ?? []);
    this.resolver = options.resolver ?? systemResolver;
    this.fixedLocalOnly = options.localOnly;
  }

  /** Tells the policy a listener of this server is bound to `host` (startServer does). */
  noteListening(host: string): void {
    const address = parseIp(host);
    this.listeners.push(address !== undefined && classifyAddress(address).kind === "loopback");
  }

  /** Loopback targets are allowed while every listener is bound to loopback. */
  get loopbackAllowed(): boolean {
    return this.fixedLocalOnly ?? (this.listeners.length > 0 && this.listeners.every(Boolean));
  }

  private nameAllowed(name: string): string | undefined {
    if (this.allowList.names.has(name)) return name;
    const suffix = this.allowList.suffixes.find((candidate) => name.endsWith(candidate));
    return suffix === undefined ? undefined : `*${suffix}`;
  }

  /** May a connection go to `address`, reached as `name` (absent for an IP literal)? */
  checkAddress(address: string, name?: string): Verdict {
    if (name !== undefined) {
      const entry = this.nameAllowed(normalName(name));
      if (entry !== undefined) return { allowed: true, reason: `host ${entry} is allowed` };
    }
    const parsed = parseIp(address);
    if (parsed === undefined) return { allowed: false, reason: `${JSON.stringify(address)} is not an IP address`, kind: "reserved" };
    const candidates = [parsed, unmapped(parsed)];
    if (this.allowList.blocks.some((block) => candidates.some((candidate) => inBlock(candidate, block)))) {
      return { allowed: true, reason: "in an allowed block" };
    }
    const { kind, range } = classifyAddress(parsed);
    if (kind === "public") return { allowed: true, reason: "public" };
    if (kind === "loopback" && this.loopbackAllowed) return { allowed: true, reason: "loopback, and the server listens on loopback only" };
    const why = kind === "loopback" ? "loopback while the server listens beyond loopback" : (range ?? kind);
    return { allowed: false, reason: `${why}; not in --allow-outbound`, kind };
  }

  /**
   * The early check of a URL given in a request: its form, and the policy
   * for what the URL alone decides (an IP literal, a localhost name). Names
   * are checked again, resolved, when the connection is made. Returns the
   * problem as the end of a sentence ("is not an http or https URL"), or
   * undefined.
   */
  urlProblem(url: string): string | undefined {
    const problem = outboundUrlProblem(url);
    if (problem !== undefined) return problem;
    const { host } = parseOutboundUrl(url);
    const name = normalName(host);
    const verdict = parseIp(host)
      ? this.checkAddress(host)
      : isLocalhostName(name) && this.nameAllowed(name) === undefined
        ? this.checkAddress("127.0.0.1")
        : undefined;
    return verdict?.allowed === false ? "is not allowed by this server's outbound policy" : undefined;
  }

  /** Resolves `hostname` and checks every address; throws OutboundRefusal if any is refused. */
  async resolve(hostname: string): Promise<ResolvedAddress[]> {
    const name = normalName(hostname);
    const literal = parseIp(name);
    const addresses: ResolvedAddress[] = literal ? [{ address: formatIp(literal), family: literal.version }] : await this.resolver(hostname);
    if (addresses.length === 0) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND", hostname });
    for (const { address } of addresses) {
      const verdict = this.checkAddress(address, literal ? undefined : name);
      if (!verdict.allowed) throw new OutboundRefusal(name, address, verdict.reason);
    }
    return addresses;
  }

  /**
   * A `lookup` for node:net, node:tls, node:http and node:http2: Node then
   * connects only to the addresses this returns, all of them checked.
   */
  readonly lookup = (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    const family = options.family === 4 || options.family === "IPv4" ? 4 : options.family === 6 || options.family === "IPv6" ? 6 : 0;
    this.resolve(hostname).then(
      (resolved) => {
        const addresses = family === 0 ? resolved : resolved.filter((entry) => entry.family === family);
        const first = addresses[0];
        if (first === undefined) {
          callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND", hostname }), options.all ? [] : "");
        } else if (options.all) {
          callback(null, addresses.map(({ address, family: f }) => ({ address, family: f })));
        } else {
          callback(null, first.address, first.family);
        }
      },
      (error: NodeJS.ErrnoException) => callback(error, options.all ? [] : ""),
    );
  };
}
