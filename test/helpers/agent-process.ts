// Runs the durable test agent (test/fixtures/durable-agent.ts, built into
// dist/) in its own process, so that a test can kill -9 it and start it
// again on the same store; a TCP gate and a callback receiver to go with it.
import { create } from "@bufbuild/protobuf";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { spawn, type ChildProcess } from "node:child_process";
import http from "node:http";
import net from "node:net";
import { fileURLToPath } from "node:url";
import { P2PService, SendResponseSchema } from "../../gen/synapse/v1/p2p_pb.js";
import { open } from "../../src/envelope/open.js";

const AGENT = fileURLToPath(new URL("../../dist/test/fixtures/durable-agent.js", import.meta.url));

export interface AgentProcess {
  url: string;
  port: number;
  instanceId: string;
  child: ChildProcess;
  stderr: () => string;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

export function startAgentProcess(args: string[]): Promise<AgentProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [AGENT, ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    const exited = new Promise<void>((done) => child.once("exit", () => done()));
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    child.stdout!.on("data", (d: Buffer) => {
      stdout += d.toString();
      const match = /listening on (\S+) instance (\S+)/.exec(stdout);
      if (match) {
        const url = match[1]!;
        resolve({
          url,
          port: Number(new URL(url).port),
          instanceId: match[2]!,
          child,
          stderr: () => stderr,
          kill: (signal = "SIGKILL") => {
            child.kill(signal);
            return exited;
          },
        });
      }
    });
    child.once("exit", (code) => reject(new Error(`the agent exited with ${code}: ${stderr}`)));
  });
}

/** A TCP gate in front of a port: refuses connections until opened. */
export async function tcpGate(targetPort: number): Promise<{ url: string; open(): void; close(): Promise<void> }> {
  let isOpen = false;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    if (!isOpen) return socket.destroy();
    const upstream = net.connect(targetPort, "127.0.0.1");
    sockets.add(socket).add(upstream);
    socket.pipe(upstream).pipe(socket);
    upstream.on("error", () => socket.destroy());
    socket.on("error", () => upstream.destroy());
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    open: () => (isOpen = true),
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise((done) => server.close(() => done()));
    },
  };
}

/** A P2PService that only takes callbacks: it verifies each envelope's signature and records every delivery, twins included. */
export async function callbackReceiver(executorKey: () => Uint8Array): Promise<{
  port: number;
  deliveries: Array<{ taskId: string; sequence: number }>;
  close(): Promise<void>;
}> {
  const deliveries: Array<{ taskId: string; sequence: number }> = [];
  const handler = connectNodeAdapter({
    routes: (r) =>
      r.service(P2PService, {
        async send(request) {
          const trust = { publicKeyFor: () => executorKey(), check: () => ({ kind: "trusted" as const }) };
          const opened = await open(request.envelope!, { trust, checkTime: false });
          deliveries.push({ taskId: opened.header.taskId, sequence: Number(opened.header.sequence) });
          return create(SendResponseSchema, {});
        },
      }),
  });
  const listening = http.createServer(handler);
  await new Promise<void>((done) => listening.listen(0, "127.0.0.1", done));
  return {
    port: (listening.address() as net.AddressInfo).port,
    deliveries,
    close: () => new Promise((done) => listening.close(() => done())),
  };
}

/**
 * A TCP proxy in front of several agent instances: new connections go to
 * them in turn, or all to one while a test pins it. Records where each
 * connection went.
 */
export async function instanceProxy(ports: number[]): Promise<{
  url: string;
  /** Sends new connections to this instance only (undefined: in turn again). */
  pin(index: number | undefined): void;
  /** The instance each connection went to, in order. */
  routed: number[];
  close(): Promise<void>;
}> {
  let turn = 0;
  let pinned: number | undefined;
  const routed: number[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    const index = pinned ?? turn++ % ports.length;
    routed.push(index);
    const upstream = net.connect(ports[index]!, "127.0.0.1");
    sockets.add(socket).add(upstream);
    socket.pipe(upstream).pipe(socket);
    upstream.on("error", () => socket.destroy());
    socket.on("error", () => upstream.destroy());
    socket.on("close", () => upstream.destroy());
    upstream.on("close", () => socket.destroy());
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    pin: (index) => (pinned = index),
    routed,
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise((done) => server.close(() => done()));
    },
  };
}
