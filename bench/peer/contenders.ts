// The servers the peer bench compares, each its own child process on
// 127.0.0.1: `synapse serve` on its default store (SQLite in a fresh data
// dir) and on --store memory, the same SQLite server's A2A face (the A2A
// workload the peer gets, in A2A open mode), and the A2A-js peer (in-memory
// task store); and which load-generator mode reaches each over which protocol.
import { A2A_JSONRPC_PATH } from "../../src/a2a/jsonrpc.js";
import type { ProcessSample } from "../child-server.js";
import { startStoreServer } from "../store-targets.js";
import { startA2AChild } from "./a2a-child.js";

export type ContenderName = "synapse-sqlite" | "synapse-memory" | "synapse-a2a" | "a2a-js";
export const CONTENDERS: readonly ContenderName[] = ["synapse-sqlite", "synapse-memory", "synapse-a2a", "a2a-js"];
export const PEER: ContenderName = "a2a-js";
/** The contender that runs the peer's own workload (A2A SendMessage, unsigned) on Synapse's engine. */
export const A2A_FACE: ContenderName = "synapse-a2a";
/** Callers without credentials admitted: the load generator signs nothing for either A2A side. */
const A2A_SERVE_FLAGS = ["--a2a-open", "--a2a-skill", "text_analysis"] as const;

/** grpc: gRPC over HTTP/2 for all; json: Synapse's Connect protocol with JSON, or A2A's JSON-RPC, over HTTP/1.1. */
export type Family = "grpc" | "json";
export type Protocol = "grpc" | "connect-json" | "jsonrpc";

export interface Target {
  contender: ContenderName;
  protocol: Protocol;
  family: Family;
  /** The load generator's -mode. */
  mode: string;
  url: string;
}

export interface Contender {
  name: ContenderName;
  pid: number;
  sample(): ProcessSample;
  stop(): Promise<void>;
  grpc: Target;
  json: Target;
}

/** What each contender is, in one line, for the output. */
export const CONTENDER_NOTES: Record<ContenderName, string> = {
  "synapse-sqlite": "synapse serve, default durable store (SQLite in a fresh data dir, WAL, --fsync normal); gRPC and Connect JSON on one port",
  "synapse-memory": "synapse serve --store memory (kept until --retention; tests only); gRPC and Connect JSON on one port",
  "synapse-a2a":
    "synapse serve's A2A v1.0 face on the default durable store (SQLite, --fsync normal), --a2a-open, skill text_analysis: the A2A-js workload (SendMessage, unsigned, blocking) over gRPC (lf.a2a.v1.A2AService on the one port) and JSON-RPC (POST /a2a/jsonrpc, HTTP/1.1); the server still signs its own event log",
  "a2a-js":
    "@a2a-js/sdk 1.3.0 DefaultRequestHandler + InMemoryTaskStore, one process: gRPC via @a2a-js/sdk/server/grpc (@grpc/grpc-js), JSON-RPC via @a2a-js/sdk/server/express (express 5, HTTP/1.1); unsigned",
};

/** @param serveFlags extra `synapse serve` flags for a Synapse contender (the peer has none). */
export async function startContender(name: ContenderName, progress: (message: string) => void, serveFlags: readonly string[] = []): Promise<Contender> {
  if (name === "a2a-js") {
    const peer = await startA2AChild((line) => progress(`[a2a-js peer] ${line}`));
    progress(`a2a-js: pid ${peer.pid}, gRPC at ${peer.grpcUrl}, JSON-RPC at ${peer.jsonRpcUrl}`);
    return {
      name,
      pid: peer.pid,
      sample: () => peer.sample(),
      stop: () => peer.stop(),
      grpc: { contender: name, protocol: "grpc", family: "grpc", mode: "a2a-grpc", url: peer.grpcUrl },
      json: { contender: name, protocol: "jsonrpc", family: "json", mode: "a2a-jsonrpc", url: peer.jsonRpcUrl },
    };
  }
  if (name === A2A_FACE) {
    const server = await startStoreServer("sqlite", undefined, progress, { serveFlags: [...A2A_SERVE_FLAGS, ...serveFlags] });
    return {
      name,
      pid: server.pid,
      sample: () => server.sample(),
      stop: () => server.stop(),
      grpc: { contender: name, protocol: "grpc", family: "grpc", mode: "a2a-grpc", url: server.url },
      json: { contender: name, protocol: "jsonrpc", family: "json", mode: "a2a-jsonrpc", url: `${server.url.replace(/\/$/, "")}${A2A_JSONRPC_PATH}` },
    };
  }
  const server = await startStoreServer(name === "synapse-sqlite" ? "sqlite" : "memory", undefined, progress, { serveFlags });
  return {
    name,
    pid: server.pid,
    sample: () => server.sample(),
    stop: () => server.stop(),
    grpc: { contender: name, protocol: "grpc", family: "grpc", mode: "synapse-grpc", url: server.url },
    json: { contender: name, protocol: "connect-json", family: "json", mode: "synapse-connect-json", url: server.url },
  };
}
