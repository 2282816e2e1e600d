// The outbound policy on its own: address classes, the allow-list, the
// early URL check, resolution with a stubbed resolver (including a name that
// rebinds), and what the connector would dial, with a stubbed dialer. No
// test here opens a connection: refusals of private, link-local and public
// addresses are decided before any socket is dialled.
import { ConnectError, createClient } from "@connectrpc/connect";
import net from "node:net";
import { describe, expect, it } from "vitest";
import { CapabilitiesService } from "../gen/synapse/v1/capabilities_pb.js";
import { silentLogger } from "../src/log.js";
import { createOutboundTransport } from "../src/net/outbound-client.js";
import { classifyAddress } from "../src/net/address-class.js";
import { formatIp, parseIp } from "../src/net/ip-address.js";
import { OutboundPolicy, OutboundRefusal, parseAllowList } from "../src/net/outbound-policy.js";
import { outboundUrlProblem, parseOutboundUrl } from "../src/net/outbound-url.js";
import { pinnedConnection, type DialOptions, type Dialer } from "../src/net/pinned-connection.js";
import type { Resolver } from "../src/net/resolver.js";
import { stubResolver } from "./helpers/outbound.js";

const kind = (address: string) => classifyAddress(parseIp(address)!).kind;

/** A dialler that records what Node would be asked to connect to, and never connects. */
function recordingDialer(): Dialer & { dialled: DialOptions[] } {
  const dialled: DialOptions[] = [];
  const dial = (options: DialOptions) => {
    dialled.push(options);
    return new net.Socket();
  };
  return Object.assign(dial, { dialled });
}

/** What address Node would connect to for these dial options: the literal host, or what the pinned lookup yields. */
function addressesFor(options: DialOptions): Promise<string[]> {
  if (options.lookup === undefined) return Promise.resolve([options.host!]);
  return new Promise((resolve, reject) =>
    options.lookup!(options.host!, { all: true }, (error, addresses) => (error ? reject(error) : resolve((addresses as { address: string }[]).map((a) => a.address)))),
  );
}

/** The error a socket from the connector fails with (a refused one fails before any packet is sent). */
function socketError(socket: net.Socket): Promise<Error> {
  return new Promise((resolve) => socket.once("error", resolve));
}

describe("address classes", () => {
  it("knows loopback, private, link-local, multicast, unspecified, broadcast and reserved IPv4", () => {
    expect(["127.0.0.1", "127.255.0.9"].map(kind)).toEqual(["loopback", "loopback"]);
    expect(["10.0.0.1", "172.16.5.4", "172.31.255.255", "192.168.1.1", "100.64.0.1", "100.127.255.255"].map(kind)).toEqual(Array(6).fill("private"));
    expect(kind("169.254.169.254")).toBe("link-local");
    expect(["224.0.0.1", "239.255.255.250"].map(kind)).toEqual(["multicast", "multicast"]);
    expect(["0.0.0.0", "0.1.2.3"].map(kind)).toEqual(["unspecified", "unspecified"]);
    expect(kind("255.255.255.255")).toBe("broadcast");
    expect(["240.0.0.1", "192.0.2.1", "198.18.0.1", "198.51.100.7", "203.0.113.9", "192.0.0.8", "192.88.99.1"].map(kind)).toEqual(Array(7).fill("reserved"));
    expect(["8.8.8.8", "1.1.1.1", "172.32.0.1", "100.128.0.1", "169.255.0.1", "11.0.0.1"].map(kind)).toEqual(Array(6).fill("public"));
  });

  it("knows IPv6 and judges mapped, NAT64 and 6to4 addresses by the IPv4 address they carry", () => {
    expect(kind("::1")).toBe("loopback");
    expect(kind("::")).toBe("unspecified");
    expect(["fc00::1", "fd12:3456::1"].map(kind)).toEqual(["private", "private"]);
    expect(["fe80::1", "febf::1"].map(kind)).toEqual(["link-local", "link-local"]);
    expect(kind("ff02::1")).toBe("multicast");
    expect(["2001:db8::1", "2001::1", "3fff::1", "100::1", "::7f00:1", "5f00::1"].map(kind)).toEqual(Array(6).fill("reserved"));
    expect(["2606:4700:4700::1111", "2a00:1450:4001::200e"].map(kind)).toEqual(["public", "public"]);
    // IPv4-mapped: exactly the IPv4 address.
    expect(["::ffff:127.0.0.1", "::ffff:7f00:1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "::ffff:8.8.8.8"].map(kind)).toEqual([
      "loopback",
      "loopback",
      "private",
      "link-local",
      "public",
    ]);
    // NAT64 and 6to4 of special addresses are refused as reserved (a gateway's loopback is not ours); of public ones, public.
    expect(["64:ff9b::7f00:1", "64:ff9b::a00:1", "64:ff9b::a9fe:a9fe", "2002:a00:1::1", "2002:7f00:1::1"].map(kind)).toEqual(Array(5).fill("reserved"));
    expect(kind("64:ff9b:1::1")).toBe("private");
    expect([kind("64:ff9b::808:808"), kind("2002:808:808::1")]).toEqual(["public", "public"]);
  });

  it("parses every spelling of an address to the same value", () => {
    expect(formatIp(parseIp("::ffff:127.0.0.1")!)).toBe("::ffff:7f00:1");
    expect(formatIp(parseIp("[2001:DB8:0:0:0:0:0:1]")!)).toBe("2001:db8::1");
    expect(formatIp(parseIp("0:0:0:0:0:0:0:0")!)).toBe("::");
    expect(parseIp("localhost")).toBeUndefined();
    expect(parseIp("fe80::1%eth0")).toBeUndefined();
  });
});

describe("outbound URLs", () => {
  it("normalises hosts as WHATWG URL parsing does, so the check sees what is connected", () => {
    for (const spelling of ["http://2130706433:8080", "http://0x7f000001:8080", "http://017700000001:8080", "http://127.1:8080", "http://0x7f.1:8080"]) {
      expect(parseOutboundUrl(spelling).host).toBe("127.0.0.1");
    }
    expect(parseOutboundUrl("http://[::ffff:127.0.0.1]:1/").host).toBe("::ffff:7f00:1");
    expect(parseOutboundUrl("http://AGENT.Example.:9/base/").baseUrl).toBe("http://agent.example.:9/base");
  });

  it("reads the protocol from the fragment, and refuses what cannot be a base URL", () => {
    expect(parseOutboundUrl("http://a.example").protocol).toBe("auto");
    expect(parseOutboundUrl("http://a.example:50051#protocol=grpc")).toMatchObject({ protocol: "grpc", baseUrl: "http://a.example:50051", port: 50051 });
    expect(parseOutboundUrl("https://a.example#protocol=connect")).toMatchObject({ protocol: "connect", secure: true, port: 443 });
    expect(parseOutboundUrl("http://a.example#protocol=grpc-web").protocol).toBe("grpc-web");
    expect(outboundUrlProblem("ftp://a.example")).toBe("is not an http or https URL");
    expect(outboundUrlProblem("not a url")).toBe("is not a URL");
    expect(outboundUrlProblem("http://user:secret@a.example")).toMatch(/credentials/);
    expect(outboundUrlProblem("http://a.example/?next=1")).toMatch(/query/);
    expect(outboundUrlProblem("http://a.example#protocol=smtp")).toMatch(/unknown fragment/);
    expect(outboundUrlProblem("http://a.example#grpc")).toMatch(/unknown fragment/);
    expect(outboundUrlProblem(`http://a.example/${"x".repeat(3000)}`)).toMatch(/longer than 2048/);
  });
});

describe("the policy", () => {
  const publicPolicy = (allow: string[] = [], resolver?: Resolver) => new OutboundPolicy({ allow, localOnly: false, resolver });

  it("refuses private, loopback, link-local, multicast, unspecified and reserved addresses and allows public ones, by default", () => {
    const policy = publicPolicy();
    for (const address of ["10.0.0.1", "192.168.0.10", "100.64.1.1", "127.0.0.1", "169.254.169.254", "224.0.0.251", "0.0.0.0", "255.255.255.255", "::1", "::", "fe80::1", "fd00::1", "ff02::1", "::ffff:127.0.0.1", "::ffff:10.1.2.3", "64:ff9b::a9fe:a9fe"]) {
      expect(policy.checkAddress(address), address).toMatchObject({ allowed: false });
    }
    for (const address of ["8.8.8.8", "93.184.215.14", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"]) {
      expect(policy.checkAddress(address), address).toMatchObject({ allowed: true });
    }
  });

  it("allows loopback exactly while every listener is on loopback, and refuses it before any listener is known", () => {
    const policy = new OutboundPolicy();
    expect(policy.checkAddress("127.0.0.1").allowed).toBe(false);
    policy.noteListening("127.0.0.1");
    expect(policy.loopbackAllowed).toBe(true);
    expect(["127.0.0.1", "127.0.0.2", "::1", "::ffff:127.0.0.1"].map((a) => policy.checkAddress(a).allowed)).toEqual([true, true, true, true]);
    // Loopback development does not open private networks.
    expect(policy.checkAddress("10.0.0.1").allowed).toBe(false);
    expect(policy.checkAddress("0.0.0.0").allowed).toBe(false);
    policy.noteListening("::1");
    expect(policy.loopbackAllowed).toBe(true);
    policy.noteListening("0.0.0.0");
    expect(policy.loopbackAllowed).toBe(false);
    expect(policy.checkAddress("127.0.0.1").allowed).toBe(false);
    const wide = new OutboundPolicy();
    wide.noteListening("::");
    expect(wide.loopbackAllowed).toBe(false);
    const lan = new OutboundPolicy();
    lan.noteListening("192.168.1.20");
    expect(lan.loopbackAllowed).toBe(false);
  });

  it("allows what --allow-outbound lists: CIDR blocks, addresses, host names and *.domain", () => {
    const policy = publicPolicy(["10.1.0.0/16", "169.254.169.254", "fd00::/8", "agents.internal", "*.corp.example", "[::1]"]);
    expect(policy.checkAddress("10.1.200.3").allowed).toBe(true);
    expect(policy.checkAddress("10.2.0.1").allowed).toBe(false);
    expect(policy.checkAddress("::ffff:10.1.0.9").allowed).toBe(true);
    expect(policy.checkAddress("169.254.169.254").allowed).toBe(true);
    expect(policy.checkAddress("169.254.169.253").allowed).toBe(false);
    expect(policy.checkAddress("fd12::1").allowed).toBe(true);
    expect(policy.checkAddress("::1").allowed).toBe(true);
    expect(policy.checkAddress("127.0.0.1").allowed).toBe(false);
    // A listed name may resolve anywhere; an unlisted one may not resolve to private space.
    expect(policy.checkAddress("10.9.9.9", "agents.internal").allowed).toBe(true);
    expect(policy.checkAddress("10.9.9.9", "AGENTS.internal.").allowed).toBe(true);
    expect(policy.checkAddress("10.9.9.9", "a.b.corp.example").allowed).toBe(true);
    expect(policy.checkAddress("10.9.9.9", "corp.example").allowed).toBe(false);
    expect(policy.checkAddress("10.9.9.9", "evilcorp.example").allowed).toBe(false);
    expect(policy.checkAddress("10.9.9.9", "other.internal").allowed).toBe(false);
    // Entries are parsed as URL hosts are: "0x7f.1" is 127.0.0.1.
    expect(parseAllowList(["0x7f.1"]).blocks).toHaveLength(1);
    for (const bad of ["10.0.0.0/33", "http://x", "a b", "*.", "1.2.3.4/x", "host:80"]) expect(() => parseAllowList([bad]), bad).toThrow(TypeError);
  });

  it("checks the literal host of a URL early, and leaves names to the connection", () => {
    const policy = publicPolicy(["agents.internal"]);
    const refused = "is not allowed by this server's outbound policy";
    for (const url of ["http://10.0.0.1:8080", "http://169.254.169.254/latest", "http://[::1]:9", "http://2130706433:80", "http://0x7f.1/", "http://[::ffff:127.0.0.1]/", "http://0/", "http://localhost:8080", "http://api.localhost/", "http://[fe80::1]/"]) {
      expect(policy.urlProblem(url), url).toBe(refused);
    }
    for (const url of ["http://8.8.8.8:80", "https://agent.example", "http://agents.internal:1", "http://[2606:4700::1]/"]) {
      expect(policy.urlProblem(url), url).toBeUndefined();
    }
    expect(policy.urlProblem("gopher://10.0.0.1")).toBe("is not an http or https URL");
    const local = new OutboundPolicy({ localOnly: true });
    expect(local.urlProblem("http://127.0.0.1:9")).toBeUndefined();
    expect(local.urlProblem("http://localhost:9")).toBeUndefined();
    expect(local.urlProblem("http://10.0.0.1:9")).toBe(refused);
  });

  it("checks every address a name resolves to", async () => {
    const resolver = stubResolver({
      "public.example": ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"],
      "private.example": ["10.0.0.7"],
      "metadata.example": ["169.254.169.254"],
      "mixed.example": ["93.184.215.14", "192.168.1.1"],
      "mapped.example": ["::ffff:10.0.0.1"],
      "agents.internal": ["10.0.0.8"],
    });
    const policy = publicPolicy(["agents.internal"], resolver);
    expect((await policy.resolve("public.example")).map((a) => a.address)).toHaveLength(2);
    expect((await policy.resolve("agents.internal")).map((a) => a.address)).toEqual(["10.0.0.8"]);
    for (const name of ["private.example", "metadata.example", "mixed.example", "mapped.example"]) {
      await expect(policy.resolve(name), name).rejects.toBeInstanceOf(OutboundRefusal);
    }
    await expect(policy.resolve("nowhere.example")).rejects.toMatchObject({ code: "ENOTFOUND" });
  });

  it("decides again on every resolution, so a name that rebinds to a private address is refused", async () => {
    const resolver = stubResolver({ "rebind.example": [["93.184.215.14"], ["10.0.0.1"]] });
    const policy = publicPolicy([], resolver);
    const dialer = recordingDialer();
    const first = pinnedConnection(policy, { host: "rebind.example", port: 80 }, false, dialer);
    expect(await addressesFor(dialer.dialled[0]!)).toEqual(["93.184.215.14"]);
    const second = pinnedConnection(policy, { host: "rebind.example", port: 80 }, false, dialer);
    await expect(addressesFor(dialer.dialled[1]!)).rejects.toBeInstanceOf(OutboundRefusal);
    expect(resolver.calls).toEqual(["rebind.example", "rebind.example"]);
    first.destroy();
    second.destroy();
  });
});

describe("the connector", () => {
  const policy = new OutboundPolicy({
    allow: ["allowed.internal"],
    localOnly: false,
    resolver: stubResolver({ "public.example": ["93.184.215.14"], "internal.example": ["10.1.1.1"], "allowed.internal": ["10.1.1.2"] }),
  });

  it("dials an allowed IP literal as it is, and never dials a refused one", async () => {
    const dialer = recordingDialer();
    pinnedConnection(policy, { host: "93.184.215.14", port: 443, servername: "" }, true, dialer).destroy();
    expect(dialer.dialled).toEqual([expect.objectContaining({ host: "93.184.215.14", port: 443 })]);
    expect(dialer.dialled[0]!.lookup).toBeUndefined();
    for (const host of ["10.0.0.1", "169.254.169.254", "127.0.0.1", "[::1]", "::ffff:127.0.0.1", "0.0.0.0", "224.0.0.1", "fe80::1"]) {
      const error = await socketError(pinnedConnection(policy, { host, port: 80 }, false, dialer));
      expect(error, host).toBeInstanceOf(OutboundRefusal);
    }
    expect(dialer.dialled).toHaveLength(1);
  });

  it("dials a name with the pinned lookup, keeping the name for Host and TLS", async () => {
    const dialer = recordingDialer();
    pinnedConnection(policy, { host: "public.example", port: 443, servername: "public.example" }, true, dialer).destroy();
    pinnedConnection(policy, { host: "internal.example", port: 80 }, false, dialer).destroy();
    pinnedConnection(policy, { host: "allowed.internal", port: 80 }, false, dialer).destroy();
    expect(dialer.dialled.map((d) => [d.host, d.servername])).toEqual([
      ["public.example", "public.example"],
      ["internal.example", undefined],
      ["allowed.internal", undefined],
    ]);
    expect(await addressesFor(dialer.dialled[0]!)).toEqual(["93.184.215.14"]);
    await expect(addressesFor(dialer.dialled[1]!)).rejects.toBeInstanceOf(OutboundRefusal);
    expect(await addressesFor(dialer.dialled[2]!)).toEqual(["10.1.1.2"]);
  });

  it("is what the outbound transports dial: HTTP/1.1 for http, TLS with ALPN h2 and the name as SNI for https", async () => {
    const dialer = recordingDialer();
    for (const url of ["http://public.example:8080", "https://public.example#protocol=grpc", "http://10.0.0.1:8080"]) {
      const transport = createOutboundTransport(url, { policy, logger: silentLogger, purpose: "test", dialer });
      // The recorded sockets never connect, so every call ends at its deadline (or at once, refused).
      const error = await createClient(CapabilitiesService, transport).getCapabilities({}, { timeoutMs: 100 }).catch((e: unknown) => ConnectError.from(e));
      expect(error, url).toBeInstanceOf(ConnectError);
      transport.close();
    }
    expect(dialer.dialled.map((d) => [d.host, d.port, d.ALPNProtocols])).toEqual([
      ["public.example", 8080, undefined],
      ["public.example", 443, ["h2"]],
    ]);
    expect(dialer.dialled[1]!.servername).toBe("public.example");
    expect(await addressesFor(dialer.dialled[1]!)).toEqual(["93.184.215.14"]);
  });

  it("answers Node's lookup in both forms, filtered by family", async () => {
    const dual = new OutboundPolicy({ localOnly: false, resolver: stubResolver({ "dual.example": ["93.184.215.14", "2606:4700::1"] }) });
    const one = await new Promise<[string, number | undefined]>((resolve, reject) =>
      dual.lookup("dual.example", { family: 6 }, (error, address, family) => (error ? reject(error) : resolve([address as string, family]))),
    );
    expect(one).toEqual(["2606:4700::1", 6]);
    const all = await new Promise<unknown>((resolve, reject) => dual.lookup("dual.example", { all: true, family: 4 }, (error, addresses) => (error ? reject(error) : resolve(addresses))));
    expect(all).toEqual([{ address: "93.184.215.14", family: 4 }]);
  });
});
