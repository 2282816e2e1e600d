// Registry mode on PostgreSQL: two registry instances (one identity, one
// database) keep one directory, one catalogue and one memory of registry
// messages, so an agent registered at one is found, renewed and audited at
// the other, and a registration replayed to the other is refused.
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { AgentHealth, AgentRegistrationPayloadSchema, RegistryService } from "../gen/synapse/v1/registry_pb.js";
import { AgentStatus, HeartbeatPayloadSchema } from "../gen/synapse/v1/payloads_pb.js";
import { loadOrCreateIdentity } from "../src/agent/identity.js";
import { seal } from "../src/envelope/seal.js";
import { findErrorDetail } from "../src/protocol/errors.js";
import { postgresStorage } from "../src/store/postgres/index.js";
import type { Storage } from "../src/store/storage.js";
import { freshDatabase, postgresAvailable } from "./helpers/postgres.js";
import { startTestServer, tempDir, type TestServer } from "./helpers/server.js";

describe.skipIf(!postgresAvailable())("two registry instances on one PostgreSQL database", () => {
  const storages: Storage[] = [];
  const registries: TestServer[] = [];
  let agent: TestServer;

  beforeAll(async () => {
    const url = await freshDatabase();
    const { identity } = await loadOrCreateIdentity(await tempDir(), { agentId: "registry_shared" });
    for (let i = 0; i < 2; i++) {
      const storage = await postgresStorage(url, { pollIntervalMs: 200 });
      storages.push(storage);
      registries.push(await startTestServer({ identity, storage, registry: { leaseMs: 60_000 } }));
    }
    agent = await startTestServer();
  });
  afterAll(async () => {
    await agent?.close();
    for (const registry of registries) await registry.close();
    for (const storage of storages) await storage.close();
  });

  const client = (server: TestServer) => createClient(RegistryService, createGrpcTransport({ baseUrl: server.url }));
  const envelope = (type: MessageType, payload: Parameters<typeof seal>[0]["payload"]) =>
    seal({ messageType: type, payload, sender: { agentId: agent.agent.identity.agentId }, receiver: { agentId: "registry_shared" } }, agent.agent.identity.key).envelope;

  it("registers at one, is found and renewed at the other, and a replay at the other is refused", async () => {
    const registration = envelope(
      MessageType.REGISTRY_REGISTER,
      create(AgentRegistrationPayloadSchema, {
        capabilities: agent.capabilities.getCapabilities(),
        interfaces: agent.capabilities.getSupportedInterfaces(),
        endpointUrl: agent.url,
        publicKey: agent.agent.identity.key.publicKey,
      }),
    );
    const [first, second] = registries.map(client);
    await first!.register({ envelope: registration });
    expect((await second!.getAgent({ agentId: agent.agent.identity.agentId })).agent?.endpointUrl).toBe(agent.url);
    expect((await second!.findAgents({ taskType: "text_analysis" })).agents.map((a) => a.capabilities?.agentId)).toContain(agent.agent.identity.agentId);
    const beat = await second!.heartbeat({ envelope: envelope(MessageType.HEARTBEAT, create(HeartbeatPayloadSchema, { status: AgentStatus.READY })) });
    expect(beat.health).toBe(AgentHealth.HEALTHY);
    // The catalogue (the agent's task types) and its audit trail are the same at both.
    const listed = await second!.listCapabilities({});
    expect(listed.capabilities.some((c) => c.agentId === agent.agent.identity.agentId)).toBe(true);
    expect((await first!.listAuditEvents({})).events.length).toBe((await second!.listAuditEvents({})).events.length);
    const replay = await second!.register({ envelope: registration }).catch((error: unknown) => ConnectError.from(error));
    expect(replay).toBeInstanceOf(ConnectError);
    expect((replay as ConnectError).code).toBe(Code.AlreadyExists);
    expect(findErrorDetail(replay)?.protocolCode).toBe("replay_detected");
  });
});
