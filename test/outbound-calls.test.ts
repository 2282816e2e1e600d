// Outbound calls through real sockets, all on loopback: callbacks and
// registry confirmations under the outbound policy (loopback allowed only
// while the server listens on loopback only; refusals look exactly like
// unreachable endpoints; names pinned to the checked address), and calls to
// agents that serve gRPC only (named by #protocol=grpc, or negotiated).
// Names resolve through a stub to 127.0.0.x; nothing here dials elsewhere.
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import http from "node:http";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CapabilitiesService } from "../gen/synapse/v1/capabilities_pb.js";
import { MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { TaskState } from "../gen/synapse/v1/payloads_pb.js";
import { SynapseClient } from "../src/client/requester.js";
import { silentLogger } from "../src/log.js";
import { createOutboundTransport, OUTBOUND_UNREACHABLE } from "../src/net/outbound-client.js";
import { OutboundPolicy } from "../src/net/outbound-policy.js";
import { findErrorDetail } from "../src/protocol/errors.js";
import { joinRegistry } from "../src/registry/join.js";
import { closedPort, countingListener, recordingLogger, startGrpcOnlyAgent, stubResolver, until, type GrpcOnlyAgent } from "./helpers/outbound.js";
import { runCli, startServe } from "./helpers/cli.js";
import { startTestServer, tempDir, type TestServer } from "./helpers/server.js";

async function refusal(attempt: Promise<unknown>) {
  const error = ConnectError.from(await attempt.then(() => new Error("expected a refusal"), (e: unknown) => e));
  return { code: error.code, message: error.rawMessage, protocolCode: findErrorDetail(error)?.protocolCode };
}

/** Collects the events pushed to `agent`'s inbox for a task until it ends. */
async function pushed(inbox: TestServer["agent"]["inbox"], executorId: string, taskId: string) {
  const events = [];
  for await (const item of inbox.events(executorId, taskId)) events.push(item);
  return events;
}

describe("callbacks under the outbound policy", () => {
  it("a server on loopback calls back by name, connecting to the checked address and keeping the name as Host", async () => {
    const resolver = stubResolver({ "requester.test": ["127.0.0.1"] });
    const executor = await startTestServer({ agentId: "executor_ob1", outbound: new OutboundPolicy({ resolver }) });
    const requester = await startTestServer();
    // An HTTP/1.1 relay in front of the requester's agent that notes the Host of every push.
    const hosts: string[] = [];
    const relay = http.createServer((req, res) => {
      hosts.push(req.headers.host ?? "");
      const upstream = http.request({ host: "127.0.0.1", port: requester.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      req.pipe(upstream);
    });
    await new Promise<void>((resolve) => relay.listen(0, "127.0.0.1", resolve));
    const relayPort = (relay.address() as net.AddressInfo).port;
    try {
      expect(executor.agent.outbound.loopbackAllowed).toBe(true);
      const client = await SynapseClient.connect({
        baseUrl: executor.url,
        identity: requester.agent.identity,
        callback: { url: `http://requester.test:${relayPort}`, inbox: requester.agent.inbox },
      });
      const { taskId } = await client.submit("text_analysis", { text: "Called back by name." });
      const events = await pushed(requester.agent.inbox, "executor_ob1", taskId);
      expect(events.at(-1)?.event.header.messageType).toBe(MessageType.TASK_COMPLETE);
      expect(new Set(hosts)).toEqual(new Set([`requester.test:${relayPort}`]));
      expect(resolver.calls).toContain("requester.test");
    } finally {
      relay.close();
      await executor.close();
      await requester.close();
    }
  });

  it("a server that listens beyond loopback refuses loopback and private callback URLs at Send, and never connects to a name that resolves to loopback", async () => {
    const { logger, lines } = recordingLogger();
    const resolver = stubResolver({ "sneaky.test": ["127.0.0.1"] });
    const executor = await startTestServer({
      agentId: "executor_ob2",
      logger,
      config: { maxRetries: 1, retryBaseDelayMs: 20 },
      // As if listening on a public address: the server itself is on 127.0.0.1 only so that the test stays on loopback.
      outbound: new OutboundPolicy({ localOnly: false, resolver }),
    });
    const requester = await startTestServer();
    const target = await countingListener();
    try {
      const identity = requester.agent.identity;
      for (const url of [
        `http://127.0.0.1:${target.port}`,
        `http://[::1]:${target.port}`,
        `http://2130706433:${target.port}`,
        `http://localhost:${target.port}`,
        "http://169.254.169.254/latest/meta-data",
        "http://10.0.0.1:8080",
        "http://[fd00::1]:8080",
      ]) {
        const client = await SynapseClient.connect({ baseUrl: executor.url, identity, callback: { url, inbox: requester.agent.inbox } });
        const refused = await refusal(client.submit("text_analysis", { text: "x." }));
        expect({ url, ...refused }).toEqual({
          url,
          code: Code.InvalidArgument,
          protocolCode: "invalid_params",
          message: `callback_url ${JSON.stringify(url)} is not allowed by this server's outbound policy`,
        });
      }
      const malformed = await SynapseClient.connect({ baseUrl: executor.url, identity, callback: { url: "http://user:pw@sneaky.test/", inbox: requester.agent.inbox } });
      expect(await refusal(malformed.submit("text_analysis", { text: "x." }))).toMatchObject({ code: Code.InvalidArgument, protocolCode: "invalid_params" });

      // A name is accepted at Send; its resolved address is refused when the callback connects.
      const client = await SynapseClient.connect({ baseUrl: executor.url, identity, callback: { url: `http://sneaky.test:${target.port}`, inbox: requester.agent.inbox } });
      const { taskId } = await client.submit("text_analysis", { text: "Never pushed." }, { waitMs: 5000 });
      await until(() => lines().some((line) => line.msg === "giving up on the callback endpoint for this task" && line.task_id === taskId));
      const refusals = lines().filter((line) => line.msg === "outbound call refused by the outbound policy");
      expect(refusals[0]).toMatchObject({ purpose: "callback", host: "sneaky.test", address: "127.0.0.1" });
      expect(lines().find((line) => line.task_id === taskId && line.msg === "giving up on the callback endpoint for this task")).toMatchObject({ error: OUTBOUND_UNREACHABLE });
      expect(target.connections()).toBe(0);
      // The task itself is unharmed and readable.
      expect((await client.getTask(taskId)).state).toBe(TaskState.COMPLETED);
    } finally {
      target.close();
      await executor.close();
      await requester.close();
    }
  });
});

describe("registry confirmations under the outbound policy", () => {
  let registry: TestServer;
  let agent: TestServer;
  const resolver = stubResolver({ "open.test": ["127.0.0.1"], "closed.test": ["127.0.0.1"], "sneaky.test": ["127.0.0.1"], "rebind.test": [["127.0.0.1"], ["127.0.0.2"]] });

  beforeAll(async () => {
    registry = await startTestServer({
      agentId: "registry_ob",
      registry: {},
      // Listening "publicly": loopback only where the operator allows it by name.
      outbound: new OutboundPolicy({ localOnly: false, allow: ["open.test", "closed.test"], resolver }),
    });
    agent = await startTestServer();
  });
  afterAll(async () => {
    await agent.close();
    await registry.close();
  });

  const register = (endpointUrl: string) =>
    joinRegistry({ registryUrl: registry.url, identity: agent.agent.identity, provider: agent.agent.provider, endpointUrl, logger: silentLogger });

  it("answers a refused endpoint exactly as a closed port, a non-agent HTTP server and a non-HTTP service", async () => {
    const counted = await countingListener();
    const http404 = http.createServer((_req, res) => res.writeHead(404).end("not here"));
    await new Promise<void>((resolve) => http404.listen(0, "127.0.0.1", resolve));
    const banner = await countingListener("SSH-2.0-OpenSSH_9.6\r\n");
    try {
      const endpoints = [
        `http://127.0.0.1:${counted.port}`, // refused: loopback literal
        `http://sneaky.test:${counted.port}`, // refused: resolves to loopback
        `http://closed.test:${await closedPort()}`, // allowed, nothing listens
        `http://open.test:${(http404.address() as net.AddressInfo).port}`, // allowed, HTTP but no agent
        `http://open.test:${banner.port}`, // allowed, not HTTP at all
        // The same two, asked for gRPC: a peer that does not speak HTTP/2 must not upset the server either.
        `http://open.test:${(http404.address() as net.AddressInfo).port}#protocol=grpc`,
        `http://open.test:${banner.port}#protocol=grpc`,
      ];
      const answers = [];
      for (const endpoint of endpoints) {
        const { code, message, protocolCode } = await refusal(register(endpoint));
        answers.push({ code, protocolCode, message: message.replace(endpoint, "URL") });
      }
      expect(answers).toEqual(Array(endpoints.length).fill({ code: Code.FailedPrecondition, protocolCode: "agent_not_ready", message: `could not confirm the registration at URL: ${OUTBOUND_UNREACHABLE}` }));
      expect(counted.connections()).toBe(0);
      expect(banner.connections()).toBeGreaterThan(0);
      // The same agent, at a name the operator allows, registers.
      const membership = await register(`http://open.test:${agent.port}`);
      expect(membership.registration.agent?.endpointUrl).toBe(`http://open.test:${agent.port}`);
      await membership.leave();
    } finally {
      counted.close();
      banner.close();
      http404.close();
    }
  });

  it("refuses malformed endpoint URLs as invalid_params", async () => {
    for (const endpoint of ["ftp://open.test/", "http://u:p@open.test:1", "http://open.test:1/?x=1", "http://open.test:1#protocol=soap"]) {
      expect(await refusal(register(endpoint)), endpoint).toMatchObject({ code: Code.InvalidArgument, protocolCode: "invalid_params" });
    }
  });

  it("pins each connection to the address it checked: a name that rebinds is refused on the next connection", async () => {
    const policy = new OutboundPolicy({ localOnly: false, allow: ["127.0.0.1/32"], resolver });
    const transport = createOutboundTransport(`http://rebind.test:${agent.port}`, { policy, logger: silentLogger, purpose: "test", opaque: true });
    try {
      const client = createClient(CapabilitiesService, transport);
      expect((await client.getCapabilities({})).capabilities?.agentId).toBe(agent.agent.identity.agentId);
      // Now rebind.test says 127.0.0.2: loopback, which this policy refuses (only 127.0.0.1/32 is allowed).
      expect(await refusal(client.getCapabilities({}))).toMatchObject({ code: Code.Unavailable, message: OUTBOUND_UNREACHABLE });
    } finally {
      transport.close();
    }
  });
});

describe("agents that serve gRPC only", () => {
  let grpcAgent: GrpcOnlyAgent;
  let registry: TestServer;

  beforeAll(async () => {
    grpcAgent = await startGrpcOnlyAgent();
    registry = await startTestServer({ agentId: "registry_grpc", registry: {} });
  });
  afterAll(async () => {
    await registry.close();
    await grpcAgent.close();
  });

  const register = (endpointUrl: string) =>
    joinRegistry({ registryUrl: registry.url, identity: grpcAgent.agent.identity, provider: grpcAgent.agent.provider, endpointUrl, logger: silentLogger });

  it("register when the endpoint URL says #protocol=grpc, and when it says nothing (negotiated); not when it insists on Connect", async () => {
    const base = `http://127.0.0.1:${grpcAgent.port}`;
    for (const endpointUrl of [`${base}#protocol=grpc`, base]) {
      const membership = await register(endpointUrl);
      expect(membership.registration.agent?.capabilities?.agentId).toBe(grpcAgent.agent.identity.agentId);
      expect(membership.registration.agent?.endpointUrl).toBe(endpointUrl);
      await membership.leave();
    }
    expect(await refusal(register(`${base}#protocol=connect`))).toMatchObject({ code: Code.FailedPrecondition, protocolCode: "agent_not_ready" });
  });

  it("receive every signed callback, with #protocol=grpc and negotiated", async () => {
    const executor = await startTestServer({ agentId: "executor_grpc" });
    try {
      for (const url of [`http://127.0.0.1:${grpcAgent.port}#protocol=grpc`, `http://127.0.0.1:${grpcAgent.port}/`]) {
        const client = await SynapseClient.connect({ baseUrl: executor.url, identity: grpcAgent.agent.identity, callback: { url, inbox: grpcAgent.agent.inbox } });
        const { taskId } = await client.submit("text_analysis", { text: "Pushed over gRPC." });
        const events = await pushed(grpcAgent.agent.inbox, "executor_grpc", taskId);
        expect(events.map((e) => e.event.sequence)).toEqual(events.map((_, i) => i + 1));
        expect(events.at(-1)?.state).toBe(TaskState.COMPLETED);
      }
    } finally {
      await executor.close();
    }
  });

  it("negotiate with an endpoint that resets HTTP/1.1 connections, as grpc-go does, and fall back to Connect when gRPC gets no answer either", async () => {
    // In front of the gRPC-only agent: HTTP/2 (the client preface) is passed on, anything else is reset after the first bytes.
    const preface = "PRI * HTTP/2.0";
    const front = (passH2: boolean) =>
      net.createServer((socket) => {
        socket.on("error", () => undefined);
        socket.once("data", (first) => {
          if (!passH2 || !first.toString("latin1").startsWith(preface)) return socket.resetAndDestroy();
          const upstream = net.connect(grpcAgent.port, "127.0.0.1");
          upstream.write(first);
          upstream.on("error", () => socket.destroy());
          socket.pipe(upstream).pipe(socket);
        });
      });
    const servers = [front(true), front(false)];
    for (const server of servers) await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const [grpcGo, dead] = servers.map((server) => `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`);
    const policy = new OutboundPolicy({ localOnly: true });
    const transports = [grpcGo!, dead!].map((url) => createOutboundTransport(url, { policy, logger: silentLogger, purpose: "test" }));
    try {
      expect((await createClient(CapabilitiesService, transports[0]!).getCapabilities({})).capabilities?.agentId).toBe(grpcAgent.agent.identity.agentId);
      expect(transports[0]!.protocol).toBe("grpc");
      expect(await refusal(createClient(CapabilitiesService, transports[1]!).getCapabilities({}))).toMatchObject({ code: Code.Unavailable, message: OUTBOUND_UNREACHABLE });
      expect(transports[1]!.protocol).toBe("connect");
    } finally {
      for (const transport of transports) transport.close();
      for (const server of servers) server.close();
    }
  });

  it("a Connect endpoint named without a protocol keeps being called with Connect over HTTP/1.1", async () => {
    const transport = createOutboundTransport(registry.url, { policy: new OutboundPolicy({ localOnly: true }), logger: silentLogger, purpose: "test" });
    try {
      await createClient(CapabilitiesService, transport).getCapabilities({});
      expect(transport.protocol).toBe("connect");
    } finally {
      transport.close();
    }
  });
});

describe("synapse serve --allow-outbound", () => {
  it("takes CIDR blocks, addresses, names and *.domain, repeatably, and refuses anything else as a usage error", async () => {
    const bad = await runCli(["serve", "--port", "0", "--data-dir", await tempDir(), "--allow-outbound", "10.0.0.0/8", "--allow-outbound", "10.0.0.0/33"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--allow-outbound "10.0.0.0/33" is not a CIDR block, IP address, host name or *.domain');
    const served = await startServe(["--data-dir", await tempDir(), "--registry", "--allow-outbound", "10.0.0.0/8", "--allow-outbound", "agents.internal", "--allow-outbound", "*.corp.example"]);
    expect((await runCli(["capabilities", served.url, "--json"], { env: { SYNAPSE_HOME: await tempDir() } })).code).toBe(0);
    expect(await served.stop()).toBe(0);
  });
});
