// What a registry keeps of registrations from made-up identities, through a
// real registry server and each store: the directory rows and catalogue
// records a registration made are gone from the store once it deregisters
// or its lease has run out and it was dropped, the audit trail keeps its
// events only for the retention period, and registrations the registry was
// not told to trust are bounded by a total and a rate (typed refusals),
// which neither an agent renewing its own entry nor an id the operator
// bound is held to.
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { create } from "@bufbuild/protobuf";
import { afterEach, describe, expect, it } from "vitest";
import type { AgentCapabilities, ImplementedInterface } from "../gen/synapse/v1/capabilities_pb.js";
import { MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { AgentDeregistrationPayloadSchema, RegistryService } from "../gen/synapse/v1/registry_pb.js";
import { seal } from "../src/envelope/seal.js";
import { TrustStore } from "../src/envelope/trust-sources.js";
import { silentLogger } from "../src/log.js";
import { findErrorDetail } from "../src/protocol/errors.js";
import { joinRegistry } from "../src/registry/join.js";
import type { Storage } from "../src/store/storage.js";
import { mintAgents, registrationOf, startImpersonatingEndpoint, type ImpersonatingEndpoint, type MintedAgent } from "../bench/minted-agents.js";
import { storeKinds } from "./store-contract/fixtures.js";
import { startTestServer, type TestServer } from "./helpers/server.js";

let registry: TestServer | undefined;
let endpoint: ImpersonatingEndpoint | undefined;
let storage: Storage | undefined;
afterEach(async () => {
  await registry?.close();
  await endpoint?.close();
  await storage?.close();
  registry = endpoint = storage = undefined;
});

interface Flood {
  rpc: Client<typeof RegistryService>;
  agents: MintedAgent[];
  register(index: number): Promise<unknown>;
  deregister(index: number): Promise<unknown>;
}

/** Made-up agents that describe themselves with the registry's own task types, and an endpoint that answers for them. */
async function flood(server: TestServer, count: number, agents: MintedAgent[] = mintAgents(count)): Promise<Flood> {
  const template: AgentCapabilities = server.agent.provider.getCapabilities();
  const interfaces: ImplementedInterface[] = server.agent.provider.getSupportedInterfaces();
  endpoint = await startImpersonatingEndpoint(agents, template, interfaces);
  const rpc = createClient(RegistryService, createGrpcTransport({ baseUrl: server.url }));
  const receiver = { agentId: server.agent.identity.agentId };
  const answering = endpoint;
  return {
    rpc,
    agents,
    register: (index) => rpc.register({ envelope: registrationOf(agents[index]!, answering.urlOf(index), template, interfaces, receiver) }),
    deregister: (index) => {
      const who = agents[index]!;
      const payload = create(AgentDeregistrationPayloadSchema, { reason: "done" });
      return rpc.deregister({ envelope: seal({ messageType: MessageType.REGISTRY_DEREGISTER, payload, sender: { agentId: who.agentId }, receiver }, who.key).envelope });
    },
  };
}

/** The catalogue records in the store that name one of `agents`. */
async function recordsOf(store: Storage, agents: readonly MintedAgent[]): Promise<number> {
  const ids = new Set(agents.map((agent) => agent.agentId));
  return [...(await store.catalogue.read()).capabilities()].filter((record) => ids.has(record.agentId)).length;
}

async function refusal(attempt: Promise<unknown>) {
  const error = ConnectError.from(await attempt.then(() => new Error("expected a refusal"), (e: unknown) => e));
  return { code: error.code, detail: findErrorDetail(error) };
}

for (const kind of storeKinds().filter((k) => k.name !== "memory-packed")) {
  describe.skipIf(!kind.available())(`a registry on the ${kind.name} store`, () => {
    it("releases what registrations brought once they deregister or are dropped, and keeps audit events only for the retention period", async () => {
      storage = await kind.open();
      registry = await startTestServer({ storage, registry: { leaseMs: 2000, dropAfterMs: 500, auditRetentionMs: 4000 } });
      const { agents, register, deregister } = await flood(registry, 6);
      for (let index = 0; index < agents.length; index++) await register(index);
      expect(await storage.directory.countAgents()).toBe(6);
      const perAgent = (await recordsOf(storage, agents.slice(0, 1)));
      expect(perAgent).toBeGreaterThan(0);
      expect(await recordsOf(storage, agents)).toBe(6 * perAgent);
      const audited = (await storage.catalogue.listAudit(0, undefined, 10_000)).length;
      expect(audited).toBeGreaterThanOrEqual(6 * perAgent);

      // Deregistering removes its entry and its records at once.
      await deregister(0);
      expect(await storage.directory.getAgent(agents[0]!.agentId)).toBeUndefined();
      expect(await recordsOf(storage, agents.slice(0, 1))).toBe(0);
      expect(await recordsOf(storage, agents.slice(1))).toBe(5 * perAgent);

      // The rest send no heartbeat: lease (2 s), then dropped 500 ms later by a sweep.
      await expect.poll(() => storage!.directory.countAgents(), { timeout: 10_000, interval: 100 }).toBe(0);
      expect(await recordsOf(storage, agents)).toBe(0);
      // Their audit events stay, for the retention period only (the newest stays, sequences go on from it).
      const trail = await storage.catalogue.listAudit(0, undefined, 10_000);
      expect(trail.length).toBeGreaterThan(audited);
      expect(trail.some((entry) => entry.event.reason === "lease expired; dropped")).toBe(true);
      await expect.poll(async () => (await storage!.catalogue.listAudit(0, undefined, 10_000)).length, { timeout: 10_000, interval: 100 }).toBe(1);
      const newest = (await storage.catalogue.listAudit(0, undefined, 10))[0]!;
      expect(newest.sequence).toBe(trail.at(-1)!.sequence);
      // A registration after all that is numbered on from the newest.
      await register(1);
      const after = await storage.catalogue.listAudit(newest.sequence, undefined, 10);
      expect(after[0]?.sequence).toBe(newest.sequence + 1);
    });
  });
}

describe("registrations the registry was not told to trust", () => {
  it("are refused past the total, typed with a retry-after, also when they arrive at once; renewals and bound ids are not", async () => {
    const [owner] = mintAgents(1);
    const bindings = new TrustStore([{ agentId: "payroll", publicKey: owner!.key.publicKey }]);
    registry = await startTestServer({ registry: { leaseMs: 60_000, bindings, limits: { maxUntrusted: 3, ratePerSecond: 1000 } } });
    const agents = [...mintAgents(12), { ...owner!, agentId: "payroll" }];
    const { register } = await flood(registry, 0, agents);
    const heldIds = async () => (await registry!.registry!.directory.find({ includeUnhealthy: true, pageSize: 100 })).agents.map((agent) => agent.capabilities!.agentId);
    // Ten at once: those confirmed together past the total give their places back.
    const outcomes = await Promise.allSettled(Array.from({ length: 10 }, (_, index) => register(index)));
    const held = await heldIds();
    expect(held.length).toBeLessThanOrEqual(3);
    expect(outcomes.filter((outcome) => outcome.status === "fulfilled").length).toBe(held.length);
    for (const outcome of outcomes) {
      if (outcome.status === "rejected") expect(findErrorDetail(outcome.reason)?.details).toMatchObject({ rule: "untrusted_registrations_full" });
    }
    // One at a time the directory fills to the total, and not past it.
    for (let index = 0; index < 10 && (await heldIds()).length < 3; index++) if (!held.includes(agents[index]!.agentId)) await register(index);
    expect(await heldIds()).toHaveLength(3);
    const full = await refusal(register(11));
    expect(full.code).toBe(Code.ResourceExhausted);
    expect(full.detail).toMatchObject({ protocolCode: "concurrency_limit", retryAfterSeconds: 60, details: { rule: "untrusted_registrations_full", max_untrusted: 3 } });
    // An agent already registered renews its entry; an id the operator bound registers whatever the count.
    const [first] = await heldIds();
    await expect(register(agents.findIndex((agent) => agent.agentId === first))).resolves.toBeDefined();
    await expect(register(12)).resolves.toBeDefined();
    expect(await heldIds()).toHaveLength(4);
  });

  it("are refused beyond the rate, from all senders together, typed with a retry-after", async () => {
    registry = await startTestServer({ registry: { leaseMs: 60_000, limits: { maxUntrusted: 100, ratePerSecond: 2 } } });
    const { register } = await flood(registry, 4);
    await register(0);
    await register(1);
    const fast = await refusal(register(2));
    expect(fast.code).toBe(Code.ResourceExhausted);
    expect(fast.detail).toMatchObject({ protocolCode: "rate_limited", details: { rule: "registration_rate", rate_per_second: 2 } });
    expect(fast.detail!.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    await expect(register(3)).resolves.toBeDefined();
  });

  it("are waited out by an agent joining (synapse serve --join), for as long as the registry says", async () => {
    registry = await startTestServer({ registry: { leaseMs: 60_000, limits: { maxUntrusted: 100, ratePerSecond: 1 } } });
    const agents = await Promise.all([startTestServer(), startTestServer()]);
    try {
      const began = Date.now();
      const joined = await Promise.all(
        agents.map((agent) => joinRegistry({ registryUrl: registry!.url, identity: agent.agent.identity, provider: agent.agent.provider, endpointUrl: agent.url, logger: silentLogger })),
      );
      // One was taken at once, the other after the registry's retry-after (a second).
      expect(Date.now() - began).toBeGreaterThanOrEqual(900);
      expect((await registry.registry!.directory.find({ includeUnhealthy: true, pageSize: 10 })).agents).toHaveLength(2);
      await Promise.all(joined.map((membership) => membership.leave()));
    } finally {
      await Promise.all(agents.map((agent) => agent.close()));
    }
  });
});
