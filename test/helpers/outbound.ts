// Helpers for outbound-call tests: a resolver stub (names resolve to what a
// test says, never through DNS), a TCP listener that counts connections, a
// port nothing listens on, a logger whose lines a test can read, and an
// agent served over gRPC only (HTTP/2 cleartext, as grpcio and grpc-go
// serve), with no Connect and no HTTP/1.1.
import { connectNodeAdapter } from "@connectrpc/connect-node";
import http2 from "node:http2";
import net from "node:net";
import { Writable } from "node:stream";
import { CapabilitiesService } from "../../gen/synapse/v1/capabilities_pb.js";
import { P2PService } from "../../gen/synapse/v1/p2p_pb.js";
import { createAgent, type Agent } from "../../src/agent/agent.js";
import { loadOrCreateIdentity } from "../../src/agent/identity.js";
import { referenceHandlers } from "../../src/agent/reference/index.js";
import { REFERENCE_TASK_TYPES } from "../../src/agent/reference/task-types.js";
import { defaultAgentCapabilities } from "../../src/capabilities/defaults.js";
import { PinnedKeys } from "../../src/envelope/trust-sources.js";
import { createLogger, type Logger } from "../../src/log.js";
import type { ResolvedAddress, Resolver } from "../../src/net/resolver.js";
import { capabilitiesService } from "../../src/server/capabilities-service.js";
import { p2pService } from "../../src/server/p2p-service.js";
import { tempDir } from "./server.js";

/** Resolves from a table: a list of addresses, or a list of lists (one per lookup, the last repeats). Unknown names: ENOTFOUND. */
export function stubResolver(table: Record<string, string[] | string[][]>): Resolver & { calls: string[] } {
  const calls: string[] = [];
  const counts = new Map<string, number>();
  const resolver = async (hostname: string): Promise<ResolvedAddress[]> => {
    calls.push(hostname);
    const entry = table[hostname];
    if (entry === undefined) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
    const n = counts.get(hostname) ?? 0;
    counts.set(hostname, n + 1);
    const answers = Array.isArray(entry[0]) ? (entry as string[][])[Math.min(n, entry.length - 1)]! : (entry as string[]);
    return answers.map((address) => ({ address, family: net.isIPv6(address) ? 6 : 4 }));
  };
  return Object.assign(resolver, { calls });
}

/** A loopback TCP listener that counts the connections it gets, answering each with `reply` (or nothing). */
export async function countingListener(reply?: string): Promise<{ port: number; connections: () => number; close: () => void }> {
  let count = 0;
  const server = net.createServer((socket) => {
    count++;
    socket.on("error", () => undefined);
    if (reply === undefined) socket.destroy();
    else socket.end(reply);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { port: (server.address() as net.AddressInfo).port, connections: () => count, close: () => server.close() };
}

/** A loopback port nothing listens on (bound, then released). */
export async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A logger that keeps its JSON lines for the test to look at. */
export function recordingLogger(): { logger: Logger; lines: () => Record<string, unknown>[] } {
  const chunks: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      chunks.push(chunk.toString());
      done();
    },
  });
  const logger = createLogger({ level: "info", destination });
  const lines = () =>
    chunks
      .join("")
      .split("\n")
      .filter((line) => line !== "")
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  return { logger, lines };
}

export async function until(condition: () => boolean, timeoutMs = 5000): Promise<void> {
  const start = Date.now();
  while (!condition()) {
    if (Date.now() - start > timeoutMs) throw new Error("timed out waiting");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

export interface GrpcOnlyAgent {
  agent: Agent;
  port: number;
  close(): Promise<void>;
}

/** An agent whose CapabilitiesService and P2PService are served over gRPC on h2c only, on loopback. */
/** A gRPC-only agent; without a name its id is derived from its key (trusted on first use). */
export async function startGrpcOnlyAgent(agentId?: string): Promise<GrpcOnlyAgent> {
  const { identity } = await loadOrCreateIdentity(await tempDir(), { agentId });
  const agent = createAgent({
    identity,
    capabilities: defaultAgentCapabilities({ agentName: agentId ?? "grpc only agent", supportedTaskTypes: [...REFERENCE_TASK_TYPES] }),
    handlers: referenceHandlers(),
    trust: PinnedKeys.inMemory(),
  });
  const draining = new AbortController();
  const handler = connectNodeAdapter({
    grpc: true,
    grpcWeb: false,
    connect: false,
    routes: (router) => {
      router.service(CapabilitiesService, capabilitiesService(agent.provider));
      router.service(P2PService, p2pService(agent, draining.signal, 16 * 1024 * 1024));
    },
  });
  const server = http2.createServer(handler);
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (session) => {
    sessions.add(session);
    session.on("close", () => sessions.delete(session));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    agent,
    port: (server.address() as net.AddressInfo).port,
    async close() {
      draining.abort();
      for (const session of sessions) session.destroy();
      await new Promise((resolve) => server.close(resolve));
      await agent.engine.shutdown();
    },
  };
}
