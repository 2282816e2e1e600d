// RegistryService through real servers: a registry and agents on ephemeral
// ports. Registration accepted and refused, leases, every FindAgents
// filter, the key directory, handshakes, and the catalogue over RPC.
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CapabilitiesService, Compliance, TransportMode } from "../gen/synapse/v1/capabilities_pb.js";
import { ComplianceEvaluationSchema } from "../gen/synapse/v1/capabilities_pb.js";
import { MessageType } from "../gen/synapse/v1/envelope_pb.js";
import {
  AgentHealth,
  AgentRegistrationPayloadSchema,
  CapabilityHealth,
  CapabilityStatus,
  CapabilityType,
  RegistryService,
} from "../gen/synapse/v1/registry_pb.js";
import { RiskLevel } from "../gen/synapse/v1/capabilities_pb.js";
import type { TaskHandler } from "../src/agent/handler.js";
import { loadOrCreateIdentity } from "../src/agent/identity.js";
import { defaultAgentCapabilities } from "../src/capabilities/defaults.js";
import { issueToken } from "../src/crypto/tokens.js";
import { seal } from "../src/envelope/seal.js";
import { PinnedKeys, TrustChain } from "../src/envelope/trust-sources.js";
import { findErrorDetail } from "../src/protocol/errors.js";
import { joinRegistry, type Membership } from "../src/registry/join.js";
import { RegistryTrust } from "../src/registry/registry-trust.js";
import { silentLogger } from "../src/log.js";
import { startServer } from "../src/server/server.js";
import { AGENT_LEVEL, groupsWired } from "./helpers/interfaces.js";
import { connectClient, requesterIdentity, startTestServer, tempDir, type TestServer } from "./helpers/server.js";

const echo: TaskHandler = { executeTask: async (ctx) => ({ output: ctx.payload }) };

let registry: TestServer;
let rpc: Client<typeof RegistryService>;
let alpha: TestServer;
let beta: TestServer;
let catalogueAdmin: Awaited<ReturnType<typeof requesterIdentity>>;
const memberships: Membership[] = [];

const join = async (server: TestServer) => {
  const membership = await joinRegistry({ registryUrl: registry.url, identity: server.agent.identity, provider: server.agent.provider, endpointUrl: server.url, logger: silentLogger });
  memberships.push(membership);
  return membership;
};

beforeAll(async () => {
  catalogueAdmin = await requesterIdentity();
  registry = await startTestServer({ agentId: "registry_main", registry: { leaseMs: 2000, admins: [catalogueAdmin.key.keyId] } });
  rpc = createClient(RegistryService, createGrpcTransport({ baseUrl: registry.url }));
  alpha = await startTestServer({ agentId: "agent_alpha" });
  beta = await startTestServer({
    agentId: "agent_beta",
    handlers: new Map([["translation", echo]]),
    capabilities: {
      supportedTaskTypes: [{ type: "translation", name: "Translation", capabilities: ["zh_en"], inputSchema: '{"type":"object"}', outputSchema: '{"type":"object"}' }],
      supportedContentTypes: ["text/plain"],
    },
  });
  await join(alpha);
  await join(beta);
});
afterAll(async () => {
  for (const membership of memberships) await membership.leave();
  await Promise.all([alpha.close(), beta.close(), registry.close()]);
});

async function refusal(attempt: Promise<unknown>) {
  const error = ConnectError.from(await attempt.then(() => new Error("expected a refusal"), (e: unknown) => e));
  return { code: error.code, detail: findErrorDetail(error), error };
}

describe("registration", () => {
  it("registers agents confirmed by calling them back, with their compliance", async () => {
    const { agent } = await rpc.getAgent({ agentId: "agent_alpha" });
    expect(agent?.endpointUrl).toBe(alpha.url);
    expect(agent?.health).toBe(AgentHealth.HEALTHY);
    expect(agent?.compliance?.compliant).toBe(true);
    expect(agent?.compliance?.basicImplemented).toBe(8);
    expect(agent?.complianceLevel).toBe(AGENT_LEVEL);
    expect(Buffer.from(agent!.capabilities!.publicKey).equals(Buffer.from(alpha.agent.identity.key.publicKey))).toBe(true);
  });

  it("refuses an agent missing a basic interface with FAILED_PRECONDITION and the ComplianceEvaluation", async () => {
    const { identity } = await loadOrCreateIdentity(await tempDir(), { agentId: "agent_partial" });
    // Only CapabilitiesService: no P2P, so most basic interfaces are missing.
    const partial = await startServer({
      capabilities: defaultAgentCapabilities({ agentId: identity.agentId, keyId: identity.key.keyId, publicKey: identity.key.publicKey }),
      port: 0,
    });
    try {
      const result = await refusal(joinRegistry({ registryUrl: registry.url, identity, provider: partial.capabilities, endpointUrl: partial.url, logger: silentLogger }));
      expect(result.code).toBe(Code.FailedPrecondition);
      const evaluation = result.error.findDetails(ComplianceEvaluationSchema)[0];
      expect(evaluation?.compliant).toBe(false);
      expect(evaluation?.missingBasics).toEqual(["MessageHandler", "P2PTaskHandler", "CallbackReceiver", "Authenticator", "IdempotencyHandler"]);
      await expect(rpc.getAgent({ agentId: "agent_partial" })).rejects.toMatchObject({ code: Code.NotFound });
    } finally {
      await partial.close();
    }
  });

  it("refuses a registration whose endpoint answers as another agent", async () => {
    const identity = await requesterIdentity("agent_liar");
    const payload = create(AgentRegistrationPayloadSchema, {
      capabilities: { ...alpha.agent.provider.getCapabilities(), agentId: "agent_liar", keyId: identity.key.keyId },
      endpointUrl: alpha.url,
      publicKey: identity.key.publicKey,
    });
    const { envelope } = seal({ messageType: MessageType.REGISTRY_REGISTER, payload, sender: { agentId: "agent_liar" }, receiver: { agentId: "registry_main" } }, identity.key);
    expect((await refusal(rpc.register({ envelope }))).code).toBe(Code.PermissionDenied);
  });

  it("keeps an agent id bound to its key and refuses a replayed registration", async () => {
    const impostor = await requesterIdentity("agent_alpha");
    const payload = create(AgentRegistrationPayloadSchema, {
      capabilities: { ...alpha.agent.provider.getCapabilities(), keyId: impostor.key.keyId },
      endpointUrl: alpha.url,
      publicKey: impostor.key.publicKey,
    });
    const { envelope } = seal({ messageType: MessageType.REGISTRY_REGISTER, payload, sender: { agentId: "agent_alpha" }, receiver: { agentId: "registry_main" } }, impostor.key);
    expect(await refusal(rpc.register({ envelope }))).toMatchObject({ code: Code.Unauthenticated });

    const genuine = create(AgentRegistrationPayloadSchema, {
      capabilities: alpha.agent.provider.getCapabilities(),
      interfaces: alpha.agent.provider.getSupportedInterfaces(),
      endpointUrl: alpha.url,
      publicKey: alpha.agent.identity.key.publicKey,
    });
    const once = seal({ messageType: MessageType.REGISTRY_REGISTER, payload: genuine, sender: { agentId: "agent_alpha" }, receiver: { agentId: "registry_main" } }, alpha.agent.identity.key).envelope;
    await rpc.register({ envelope: once });
    expect((await refusal(rpc.register({ envelope: once }))).detail?.protocolCode).toBe("replay_detected");
  });

  it("refuses an envelope addressed to another registry", async () => {
    const payload = create(AgentRegistrationPayloadSchema, { capabilities: alpha.agent.provider.getCapabilities(), endpointUrl: alpha.url, publicKey: alpha.agent.identity.key.publicKey });
    const { envelope } = seal({ messageType: MessageType.REGISTRY_REGISTER, payload, sender: { agentId: "agent_alpha" }, receiver: { agentId: "elsewhere" } }, alpha.agent.identity.key);
    expect((await refusal(rpc.register({ envelope }))).code).toBe(Code.PermissionDenied);
  });
});

describe("leases", () => {
  it("marks an agent that misses heartbeats unhealthy, then drops it; heartbeats keep a lease", async () => {
    const short = await startTestServer({ agentId: "registry_short", registry: { leaseMs: 300, dropAfterMs: 600 } });
    const silent = await startTestServer({ agentId: "agent_silent" });
    const steady = await startTestServer({ agentId: "agent_steady" });
    try {
      const shortRpc = createClient(RegistryService, createGrpcTransport({ baseUrl: short.url }));
      const beating = await joinRegistry({ registryUrl: short.url, identity: steady.agent.identity, provider: steady.agent.provider, endpointUrl: steady.url, logger: silentLogger });
      // Registered without the heartbeat loop: seal the registration by hand.
      const payload = create(AgentRegistrationPayloadSchema, {
        capabilities: silent.agent.provider.getCapabilities(),
        interfaces: silent.agent.provider.getSupportedInterfaces(),
        endpointUrl: silent.url,
        publicKey: silent.agent.identity.key.publicKey,
      });
      const { envelope } = seal({ messageType: MessageType.REGISTRY_REGISTER, payload, sender: { agentId: "agent_silent" }, receiver: { agentId: "registry_short" } }, silent.agent.identity.key);
      const registered = await shortRpc.register({ envelope });
      expect(registered.heartbeatInterval).toBeDefined();
      await new Promise((resolve) => setTimeout(resolve, 450));
      expect((await shortRpc.getAgent({ agentId: "agent_silent" })).agent?.health).toBe(AgentHealth.UNHEALTHY);
      expect((await shortRpc.findAgents({ taskType: "text_analysis" })).agents.map((a) => a.capabilities?.agentId)).toEqual(["agent_steady"]);
      const all = await shortRpc.findAgents({ taskType: "text_analysis", includeUnhealthy: true });
      expect(all.agents.map((a) => a.capabilities?.agentId)).toEqual(["agent_steady", "agent_silent"]);
      // Its catalogue entries follow its health.
      const listed = await shortRpc.listCapabilities({ code: "text_analysis" });
      expect(listed.capabilities.find((c) => c.agentId === "agent_silent")?.health).toBe(CapabilityHealth.UNHEALTHY);
      await new Promise((resolve) => setTimeout(resolve, 700));
      await expect(shortRpc.getAgent({ agentId: "agent_silent" })).rejects.toMatchObject({ code: Code.NotFound });
      expect((await shortRpc.getAgent({ agentId: "agent_steady" })).agent?.health).toBe(AgentHealth.HEALTHY);
      await beating.leave();
      await expect(shortRpc.getAgent({ agentId: "agent_steady" })).rejects.toMatchObject({ code: Code.NotFound });
    } finally {
      await Promise.all([short.close(), silent.close(), steady.close()]);
    }
  });
});

describe("FindAgents", () => {
  const ids = async (request: Parameters<typeof rpc.findAgents>[0]) => (await rpc.findAgents(request)).agents.map((a) => a.capabilities?.agentId);

  it("filters by task type, capability tag, content type, transport mode, interface and compliance", async () => {
    expect(await ids({ taskType: "summarization" })).toEqual(["agent_alpha"]);
    expect(await ids({ taskType: "translation" })).toEqual(["agent_beta"]);
    expect(await ids({ taskType: "poetry" })).toEqual([]);
    expect(await ids({ capability: "zh_en" })).toEqual(["agent_beta"]);
    expect(await ids({ capability: "word_frequency" })).toEqual(["agent_alpha"]);
    expect(await ids({ contentType: "text/plain" })).toEqual(["agent_beta"]);
    expect(await ids({ contentType: "application/json" })).toEqual(["agent_alpha"]);
    expect(await ids({ transportMode: TransportMode.CALLBACK })).toEqual(["agent_alpha", "agent_beta"]);
    expect(await ids({ interface: "HILHandler" })).toEqual(["agent_alpha", "agent_beta"]);
    expect(await ids({ interface: "GroupManager" })).toEqual(groupsWired ? ["agent_alpha", "agent_beta"] : []);
    expect(await ids({ interface: "EscalationHandler" })).toEqual(["agent_alpha", "agent_beta"]);
    expect(await ids({ minCompliance: Compliance.BASIC })).toEqual(["agent_alpha", "agent_beta"]);
    expect(await ids({ minCompliance: Compliance.COMPLETE })).toEqual(["agent_alpha", "agent_beta"]);
    expect(await ids({ minCompliance: Compliance.ADVANCED })).toEqual(groupsWired ? ["agent_alpha", "agent_beta"] : []);
    expect(await ids({ taskType: "translation", contentType: "application/json" })).toEqual([]);
  });

  it("pages", async () => {
    const first = await rpc.findAgents({ pageSize: 1 });
    expect(first.agents).toHaveLength(1);
    const second = await rpc.findAgents({ pageSize: 1, pageToken: first.nextPageToken });
    expect(second.agents[0]?.capabilities?.agentId).not.toBe(first.agents[0]?.capabilities?.agentId);
    expect(second.nextPageToken).toBe("");
    await expect(rpc.findAgents({ pageToken: "%%%" })).rejects.toMatchObject({ code: Code.InvalidArgument });
  });
});

describe("the registry as a key directory", () => {
  it("lets an agent refuse an impostor of a registered agent it has never met", async () => {
    const guarded = await startTestServer({ agentId: "agent_guarded", trust: new TrustChain([new RegistryTrust(registry.url), PinnedKeys.inMemory()]) });
    try {
      const impostor = await requesterIdentity("agent_beta");
      const client = await connectClient(guarded, { identity: impostor });
      expect((await refusal(client.submit("text_analysis", { text: "hi" }))).detail?.protocolCode).toBe("unknown_sender");
      const genuine = await connectClient(guarded, { identity: beta.agent.identity });
      expect((await genuine.submit("text_analysis", { text: "hi." }, { waitMs: 5000 })).task?.taskId).toBeDefined();
    } finally {
      await guarded.close();
    }
  });
});

describe("Handshake", () => {
  const caps = () => createClient(CapabilitiesService, createGrpcTransport({ baseUrl: alpha.url }));
  it("negotiates versions: same, minor, patch, major, not semver", async () => {
    expect(await caps().handshake({ protocolVersion: "1.0.0" })).toMatchObject({ compatible: true, negotiatedVersion: "1.0.0", protocolVersion: "1.0.0" });
    expect(await caps().handshake({ protocolVersion: "1.3.2" })).toMatchObject({ compatible: true, negotiatedVersion: "1.0.0" });
    expect(await caps().handshake({ protocolVersion: "1.0.7" })).toMatchObject({ compatible: true, negotiatedVersion: "1.0.0" });
    const major = await caps().handshake({ protocolVersion: "2.0.0" });
    expect(major.compatible).toBe(false);
    expect(major.reason).toContain("major");
    expect(major.negotiatedVersion).toBe("");
    await expect(caps().handshake({ protocolVersion: "one" })).rejects.toMatchObject({ code: Code.InvalidArgument });
  });

  it("returns the common interfaces at the lower version", async () => {
    const response = await caps().handshake({
      protocolVersion: "1.0.0",
      interfaces: [
        { name: "CapabilitiesProvider", version: "1.0.3" },
        { name: "P2PTaskHandler", version: "1.2.0" },
        { name: "GroupManager", version: "1.0.0" },
        { name: "HTTPTransport", version: "2.0.0" },
      ],
    });
    expect(response.commonInterfaces.map((i) => [i.name, i.version])).toEqual([
      ["CapabilitiesProvider", "1.0.0"],
      ["P2PTaskHandler", "1.0.0"],
    ]);
    expect(response.agent?.agentId).toBe("agent_alpha");
  });
});

describe("compliance and the catalogue over RPC", () => {
  it("evaluates a list of interfaces and a registered agent", async () => {
    const basics = ["AgentIdentity", "MessageHandler", "CapabilitiesProvider", "P2PTaskHandler", "CallbackReceiver", "HTTPTransport", "Authenticator"];
    const missing = await rpc.evaluateCompliance({ interfaces: [...basics, "Nonsense"].map((name) => ({ name })) });
    expect(missing.evaluation).toMatchObject({ basicImplemented: 7, basicRequired: 8, compliant: false, missingBasics: ["IdempotencyHandler"] });
    expect(missing.unknownInterfaces).toEqual(["Nonsense"]);
    const all = await rpc.evaluateCompliance({ interfaces: [...basics, "IdempotencyHandler"].map((name) => ({ name })) });
    expect(all).toMatchObject({ evaluation: { compliant: true, completeTotal: 5, advancedTotal: 5 }, complianceLevel: Compliance.BASIC });
    const agent = await rpc.evaluateCompliance({ agentId: "agent_alpha" });
    expect(agent.evaluation?.agentId).toBe("agent_alpha");
    expect(agent.evaluation?.completeImplemented).toBe(5);
    expect(agent.complianceLevel).toBe(AGENT_LEVEL);
  });

  it("lists the agents' governed task types, and matches them by ontology", async () => {
    const match = await rpc.matchCapabilities({ ontology: { domain: "text", intent: "summarize" } });
    expect(match.candidates[0]?.capability).toMatchObject({ code: "summarization", agentId: "agent_alpha", capabilityType: CapabilityType.TASK });
    expect(match.candidates[0]?.reasons.join("\n")).toContain("intent");
  });

  it("needs a bearer token to write, enforces governance, audits, and matches by ontology with granted permissions", async () => {
    const writer = catalogueAdmin;
    const headers = { Authorization: `Bearer ${await issueToken(writer.key, { agentId: writer.agentId, audience: "registry_main" })}` };
    const reader = await requesterIdentity();
    const readerHeaders = { Authorization: `Bearer ${await issueToken(reader.key, { agentId: reader.agentId, audience: "registry_main" })}` };
    const rule = {
      code: "duplicate_invoice_rule",
      name: "Duplicate invoice rule",
      capabilityType: CapabilityType.RULE,
      domain: "reimbursement",
      scenarios: ["invoice_validation", "reimbursement_audit"],
      intents: ["validate", "explain", "monitor"],
      riskSignals: ["duplicate_invoice"],
      inputSchema: '{"type":"object"}',
      outputSchema: '{"type":"object"}',
      permissionRequired: ["reimbursement:read", "risk:write"],
      riskLevel: RiskLevel.HIGH,
      owner: "finance risk team",
      reviewer: "audit lead",
      version: "v1.9",
      status: CapabilityStatus.ACTIVE,
    };
    expect((await refusal(rpc.registerCapability({ capability: rule }))).code).toBe(Code.Unauthenticated);
    const noReviewer = await refusal(rpc.registerCapability({ capability: { ...rule, reviewer: "" } }, { headers }));
    expect(noReviewer.code).toBe(Code.InvalidArgument);
    expect(noReviewer.detail?.details).toMatchObject({ rule: "high_risk_requires_reviewer" });
    const stored = (await rpc.registerCapability({ capability: rule }, { headers })).capability!;
    expect(stored.id).toBe("cap_duplicate_invoice_rule_v1_9");

    const ontology = { domain: "reimbursement", scenario: "invoice_validation", intent: "explain", riskSignals: ["duplicate_invoice"], nextStep: "run_rule" };
    await rpc.setPermissionGrant({ keyId: reader.key.keyId, permissions: ["reimbursement:read", "risk:write"], reason: "analyst" }, { headers });
    const allowed = await rpc.matchCapabilities({ ontology }, { headers: readerHeaders });
    expect(allowed.candidates.map((c) => c.capability?.id)).toEqual([stored.id]);
    expect(allowed.permissionsApplied).toEqual(["reimbursement:read", "risk:write"]);
    const narrowed = await rpc.matchCapabilities({ ontology, permissions: ["reimbursement:read"] }, { headers: readerHeaders });
    expect(narrowed.candidates).toEqual([]);

    await rpc.setCapabilityStatus({ id: stored.id, status: CapabilityStatus.OFFLINE, reason: "maintenance" }, { headers });
    expect((await rpc.matchCapabilities({ ontology }, { headers: readerHeaders })).candidates).toEqual([]);
    const audit = await rpc.listAuditEvents({ capabilityId: stored.id });
    expect(audit.events.map((e) => [e.actor, e.from, e.to])).toEqual([
      [writer.agentId, "", "v1.9"],
      [writer.agentId, "CAPABILITY_STATUS_ACTIVE", "CAPABILITY_STATUS_OFFLINE"],
    ]);
    expect(audit.events[1]?.reason).toBe("maintenance");
  });
});
