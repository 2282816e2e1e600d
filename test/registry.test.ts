// RegistryService through real servers: a registry and agents on ephemeral
// ports. Registration accepted and refused, who may claim an agent id,
// leases, every FindAgents filter, the key directory, handshakes, and the
// catalogue over RPC.
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
import { isSelfCertifying, selfCertifyingAgentId } from "../src/crypto/keys.js";
import { issueToken } from "../src/crypto/tokens.js";
import { seal } from "../src/envelope/seal.js";
import { PinnedKeys, TrustChain, TrustStore } from "../src/envelope/trust-sources.js";
import { findErrorDetail } from "../src/protocol/errors.js";
import { joinRegistry, type Membership } from "../src/registry/join.js";
import { RegistryTrust } from "../src/registry/registry-trust.js";
import { silentLogger } from "../src/log.js";
import { startServer } from "../src/server/server.js";
import { UNGROUPED_LEVEL } from "./helpers/interfaces.js";
import { connectClient, requesterIdentity, startTestServer, tempDir, type TestServer } from "./helpers/server.js";

const echo: TaskHandler = { executeTask: async (ctx) => ({ output: ctx.payload }) };

let registry: TestServer;
let rpc: Client<typeof RegistryService>;
let alpha: TestServer;
let beta: TestServer;
/** The agents' ids: derived from their keys (their default), so the registry binds them to no other key. */
let ALPHA: string;
let BETA: string;
/** The registry operator's bindings of names to keys (a trust store). */
const bindings = new TrustStore([]);
let catalogueAdmin: Awaited<ReturnType<typeof requesterIdentity>>;
const memberships: Membership[] = [];

const join = async (server: TestServer) => {
  const membership = await joinRegistry({ registryUrl: registry.url, identity: server.agent.identity, provider: server.agent.provider, endpointUrl: server.url, logger: silentLogger });
  memberships.push(membership);
  return membership;
};

beforeAll(async () => {
  catalogueAdmin = await requesterIdentity();
  registry = await startTestServer({ agentId: "registry_main", registry: { leaseMs: 2000, admins: [catalogueAdmin.key.keyId], bindings } });
  rpc = createClient(RegistryService, createGrpcTransport({ baseUrl: registry.url }));
  alpha = await startTestServer();
  beta = await startTestServer({
    handlers: new Map([["translation", echo]]),
    capabilities: {
      supportedTaskTypes: [{ type: "translation", name: "Translation", capabilities: ["zh_en"], inputSchema: '{"type":"object"}', outputSchema: '{"type":"object"}' }],
      supportedContentTypes: ["text/plain"],
    },
  });
  ALPHA = alpha.agent.identity.agentId;
  BETA = beta.agent.identity.agentId;
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
    expect(isSelfCertifying(ALPHA, alpha.agent.identity.key.publicKey)).toBe(true);
    const { agent } = await rpc.getAgent({ agentId: ALPHA });
    expect(agent?.endpointUrl).toBe(alpha.url);
    expect(agent?.health).toBe(AgentHealth.HEALTHY);
    expect(agent?.compliance?.compliant).toBe(true);
    expect(agent?.compliance?.basicImplemented).toBe(8);
    expect(agent?.complianceLevel).toBe(UNGROUPED_LEVEL);
    expect(Buffer.from(agent!.capabilities!.publicKey).equals(Buffer.from(alpha.agent.identity.key.publicKey))).toBe(true);
  });

  it("refuses an agent missing a basic interface with FAILED_PRECONDITION and the ComplianceEvaluation", async () => {
    const { identity } = await loadOrCreateIdentity(await tempDir());
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
      await expect(rpc.getAgent({ agentId: identity.agentId })).rejects.toMatchObject({ code: Code.NotFound });
    } finally {
      await partial.close();
    }
  });

  it("refuses a registration whose endpoint answers as another agent", async () => {
    const identity = await requesterIdentity();
    const payload = create(AgentRegistrationPayloadSchema, {
      capabilities: { ...alpha.agent.provider.getCapabilities(), agentId: identity.agentId, keyId: identity.key.keyId },
      endpointUrl: alpha.url,
      publicKey: identity.key.publicKey,
    });
    const { envelope } = seal({ messageType: MessageType.REGISTRY_REGISTER, payload, sender: { agentId: identity.agentId }, receiver: { agentId: "registry_main" } }, identity.key);
    const refused = await refusal(rpc.register({ envelope }));
    expect(refused.code).toBe(Code.PermissionDenied);
    expect(refused.error.rawMessage).toContain(`answers as ${ALPHA}`);
  });

  it("keeps an agent id bound to its key and refuses a replayed registration", async () => {
    const impostor = await requesterIdentity(ALPHA);
    const payload = create(AgentRegistrationPayloadSchema, {
      capabilities: { ...alpha.agent.provider.getCapabilities(), keyId: impostor.key.keyId },
      endpointUrl: alpha.url,
      publicKey: impostor.key.publicKey,
    });
    const { envelope } = seal({ messageType: MessageType.REGISTRY_REGISTER, payload, sender: { agentId: ALPHA }, receiver: { agentId: "registry_main" } }, impostor.key);
    expect(await refusal(rpc.register({ envelope }))).toMatchObject({ code: Code.Unauthenticated });

    const genuine = create(AgentRegistrationPayloadSchema, {
      capabilities: alpha.agent.provider.getCapabilities(),
      interfaces: alpha.agent.provider.getSupportedInterfaces(),
      endpointUrl: alpha.url,
      publicKey: alpha.agent.identity.key.publicKey,
    });
    const once = seal({ messageType: MessageType.REGISTRY_REGISTER, payload: genuine, sender: { agentId: ALPHA }, receiver: { agentId: "registry_main" } }, alpha.agent.identity.key).envelope;
    await rpc.register({ envelope: once });
    expect((await refusal(rpc.register({ envelope: once }))).detail?.protocolCode).toBe("replay_detected");
  });

  it("refuses an envelope addressed to another registry", async () => {
    const payload = create(AgentRegistrationPayloadSchema, { capabilities: alpha.agent.provider.getCapabilities(), endpointUrl: alpha.url, publicKey: alpha.agent.identity.key.publicKey });
    const { envelope } = seal({ messageType: MessageType.REGISTRY_REGISTER, payload, sender: { agentId: ALPHA }, receiver: { agentId: "elsewhere" } }, alpha.agent.identity.key);
    expect((await refusal(rpc.register({ envelope }))).code).toBe(Code.PermissionDenied);
  });
});

describe("who may claim an agent id", () => {
  /** A registration of `server`'s agent, signed by its key, as joinRegistry sends it. */
  const registrationOf = (server: TestServer, registryId: string) => {
    const identity = server.agent.identity;
    const payload = create(AgentRegistrationPayloadSchema, {
      capabilities: server.agent.provider.getCapabilities(),
      interfaces: server.agent.provider.getSupportedInterfaces(),
      endpointUrl: server.url,
      publicKey: identity.key.publicKey,
    });
    return seal({ messageType: MessageType.REGISTRY_REGISTER, payload, sender: { agentId: identity.agentId }, receiver: { agentId: registryId } }, identity.key).envelope;
  };
  /** An agent that trusts this registry's key directory before pinning. */
  const trustsTheRegistry = (url: string) => startTestServer({ trust: new TrustChain([new RegistryTrust(url, 0), PinnedKeys.inMemory()]) });

  it("refuses a stranger who registers a name first; the name bound by the operator goes only to the bound key", async () => {
    const owner = await startTestServer({ agentId: "billing_agent" });
    const squatter = await startTestServer({ agentId: "billing_agent" });
    const guarded = await trustsTheRegistry(registry.url);
    try {
      // Nobody has bound the name: the first key to ask for it does not get it.
      const squat = await refusal(rpc.register({ envelope: registrationOf(squatter, "registry_main") }));
      expect(squat.code).toBe(Code.PermissionDenied);
      expect(squat.detail?.protocolCode).toBe("permission_denied");
      expect(squat.detail?.details).toEqual({
        rule: "name_not_bound",
        agent_id: "billing_agent",
        key_id: squatter.agent.identity.key.keyId,
        derived_agent_id: selfCertifyingAgentId(squatter.agent.identity.key.publicKey),
      });
      expect(squat.error.rawMessage).toContain("agent billing_agent may not be registered with key");
      expect(squat.error.rawMessage).toContain(`Register as ${selfCertifyingAgentId(squatter.agent.identity.key.publicKey)}`);
      expect(squat.error.rawMessage).toContain("ask the registry's operator to bind billing_agent to this key");
      await expect(rpc.getAgent({ agentId: "billing_agent" })).rejects.toMatchObject({ code: Code.NotFound });
      // So an agent that trusts the registry does not take the squatter for billing_agent.
      const asSquatter = await connectClient(guarded, { identity: squatter.agent.identity });
      expect((await refusal(asSquatter.submit("text_analysis", { text: "hi" }))).detail?.protocolCode).toBe("unknown_sender");
      // Nor can a stranger take the id derived from a key that is not its own.
      const unborn = selfCertifyingAgentId(owner.agent.identity.key.publicKey);
      const early = await refusal(
        rpc.register({
          envelope: seal(
            {
              messageType: MessageType.REGISTRY_REGISTER,
              payload: create(AgentRegistrationPayloadSchema, {
                capabilities: { ...squatter.agent.provider.getCapabilities(), agentId: unborn },
                interfaces: squatter.agent.provider.getSupportedInterfaces(),
                endpointUrl: squatter.url,
                publicKey: squatter.agent.identity.key.publicKey,
              }),
              sender: { agentId: unborn },
              receiver: { agentId: "registry_main" },
            },
            squatter.agent.identity.key,
          ).envelope,
        }),
      );
      expect(early.detail?.details).toMatchObject({ rule: "name_not_bound", agent_id: unborn });

      // The operator binds the name to the owner's key: the squatter is still refused, and told whose it is.
      bindings.add("billing_agent", owner.agent.identity.key.publicKey);
      const bound = await refusal(rpc.register({ envelope: registrationOf(squatter, "registry_main") }));
      expect(bound.code).toBe(Code.PermissionDenied);
      expect(bound.detail?.details).toMatchObject({ rule: "bound_to_another_key", agent_id: "billing_agent", expected_key_id: owner.agent.identity.key.keyId });
      const membership = await join(owner);
      expect(membership.registration.agent?.capabilities?.keyId).toBe(owner.agent.identity.key.keyId);
      expect((await rpc.getAgent({ agentId: "billing_agent" })).agent?.endpointUrl).toBe(owner.url);
      // Once registered, the id keeps its key.
      expect((await refusal(rpc.register({ envelope: registrationOf(squatter, "registry_main") }))).detail?.protocolCode).toBe("unknown_sender");
      const asOwner = await connectClient(guarded, { identity: owner.agent.identity });
      expect((await asOwner.submit("text_analysis", { text: "hi." }, { waitMs: 5000 })).task?.taskId).toBeDefined();
      await membership.leave();
      memberships.splice(memberships.indexOf(membership), 1);
      await expect(rpc.getAgent({ agentId: "billing_agent" })).rejects.toMatchObject({ code: Code.NotFound });
    } finally {
      await Promise.all([owner.close(), squatter.close(), guarded.close()]);
    }
  });

  it("binds names first-come only on a registry started with open names, where the operator's bindings still hold", async () => {
    const payrollOwner = await requesterIdentity("payroll_agent");
    const openBindings = new TrustStore([{ agentId: "payroll_agent", publicKey: payrollOwner.key.publicKey }]);
    const open = await startTestServer({ agentId: "registry_open", registry: { openNames: true, bindings: openBindings } });
    const owner = await startTestServer({ agentId: "billing_agent" });
    const squatter = await startTestServer({ agentId: "billing_agent" });
    const payrollSquatter = await startTestServer({ agentId: "payroll_agent" });
    try {
      const openRpc = createClient(RegistryService, createGrpcTransport({ baseUrl: open.url }));
      await openRpc.register({ envelope: registrationOf(squatter, "registry_open") });
      expect((await openRpc.getAgent({ agentId: "billing_agent" })).agent?.capabilities?.keyId).toBe(squatter.agent.identity.key.keyId);
      expect((await refusal(openRpc.register({ envelope: registrationOf(owner, "registry_open") }))).detail?.protocolCode).toBe("unknown_sender");
      const bound = await refusal(openRpc.register({ envelope: registrationOf(payrollSquatter, "registry_open") }));
      expect(bound.code).toBe(Code.PermissionDenied);
      expect(bound.detail?.details).toMatchObject({ rule: "bound_to_another_key", agent_id: "payroll_agent", expected_key_id: payrollOwner.key.keyId });
    } finally {
      await Promise.all([open.close(), owner.close(), squatter.close(), payrollSquatter.close()]);
    }
  });
});

describe("leases", () => {
  it("marks an agent that misses heartbeats unhealthy, then drops it; heartbeats keep a lease", async () => {
    const short = await startTestServer({ agentId: "registry_short", registry: { leaseMs: 300, dropAfterMs: 600 } });
    const silent = await startTestServer();
    const steady = await startTestServer();
    const [SILENT, STEADY] = [silent.agent.identity.agentId, steady.agent.identity.agentId];
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
      const { envelope } = seal({ messageType: MessageType.REGISTRY_REGISTER, payload, sender: { agentId: SILENT }, receiver: { agentId: "registry_short" } }, silent.agent.identity.key);
      const registered = await shortRpc.register({ envelope });
      expect(registered.heartbeatInterval).toBeDefined();
      await new Promise((resolve) => setTimeout(resolve, 450));
      expect((await shortRpc.getAgent({ agentId: SILENT })).agent?.health).toBe(AgentHealth.UNHEALTHY);
      expect((await shortRpc.findAgents({ taskType: "text_analysis" })).agents.map((a) => a.capabilities?.agentId)).toEqual([STEADY]);
      const all = await shortRpc.findAgents({ taskType: "text_analysis", includeUnhealthy: true });
      expect(all.agents.map((a) => a.capabilities?.agentId)).toEqual([STEADY, SILENT]);
      // Its catalogue entries follow its health.
      const listed = await shortRpc.listCapabilities({ code: "text_analysis" });
      expect(listed.capabilities.find((c) => c.agentId === SILENT)?.health).toBe(CapabilityHealth.UNHEALTHY);
      await new Promise((resolve) => setTimeout(resolve, 700));
      await expect(shortRpc.getAgent({ agentId: SILENT })).rejects.toMatchObject({ code: Code.NotFound });
      expect((await shortRpc.getAgent({ agentId: STEADY })).agent?.health).toBe(AgentHealth.HEALTHY);
      await beating.leave();
      await expect(shortRpc.getAgent({ agentId: STEADY })).rejects.toMatchObject({ code: Code.NotFound });
    } finally {
      await Promise.all([short.close(), silent.close(), steady.close()]);
    }
  });
});

describe("FindAgents", () => {
  const ids = async (request: Parameters<typeof rpc.findAgents>[0]) => (await rpc.findAgents(request)).agents.map((a) => a.capabilities?.agentId);
  /** Agents of equal health come in the order of their ids. */
  const both = () => [ALPHA, BETA].sort();

  it("filters by task type, capability tag, content type, transport mode, interface and compliance", async () => {
    expect(await ids({ taskType: "summarization" })).toEqual([ALPHA]);
    expect(await ids({ taskType: "translation" })).toEqual([BETA]);
    expect(await ids({ taskType: "poetry" })).toEqual([]);
    expect(await ids({ capability: "zh_en" })).toEqual([BETA]);
    expect(await ids({ capability: "word_frequency" })).toEqual([ALPHA]);
    expect(await ids({ contentType: "text/plain" })).toEqual([BETA]);
    expect(await ids({ contentType: "application/json" })).toEqual([ALPHA]);
    expect(await ids({ transportMode: TransportMode.CALLBACK })).toEqual(both());
    expect(await ids({ interface: "HILHandler" })).toEqual(both());
    expect(await ids({ interface: "GroupManager" })).toEqual([]); // neither hosts groups
    expect(await ids({ interface: "EscalationHandler" })).toEqual(both());
    expect(await ids({ minCompliance: Compliance.BASIC })).toEqual(both());
    expect(await ids({ minCompliance: Compliance.COMPLETE })).toEqual(both());
    expect(await ids({ minCompliance: Compliance.ADVANCED })).toEqual([]);
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
    const guarded = await startTestServer({ trust: new TrustChain([new RegistryTrust(registry.url), PinnedKeys.inMemory()]) });
    try {
      const impostor = await requesterIdentity(BETA);
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
    expect(response.agent?.agentId).toBe(ALPHA);
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
    const agent = await rpc.evaluateCompliance({ agentId: ALPHA });
    expect(agent.evaluation?.agentId).toBe(ALPHA);
    expect(agent.evaluation?.completeImplemented).toBe(5);
    expect(agent.complianceLevel).toBe(UNGROUPED_LEVEL);
  });

  it("lists the agents' governed task types, and matches them by ontology", async () => {
    const match = await rpc.matchCapabilities({ ontology: { domain: "text", intent: "summarize" } });
    expect(match.candidates[0]?.capability).toMatchObject({ code: "summarization", agentId: ALPHA, capabilityType: CapabilityType.TASK });
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
