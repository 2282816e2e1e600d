// The agent directory: registrations confirmed by calling the agent back,
// leases renewed by heartbeats (missed: unhealthy, then dropped), lookups by
// what agents can do, and the binding of each agent id to its key, which
// makes the directory a key directory other agents may trust. Identity is
// never first-come: an id the directory does not hold yet is bound only to
// the key it is derived from, or to the key the operator bound it to.
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  ComplianceEvaluationSchema,
  type AgentCapabilities,
  type Compliance,
  type ImplementedInterface,
  type TransportMode,
} from "../../gen/synapse/v1/capabilities_pb.js";
import { ErrorCode, ErrorDetailSchema } from "../../gen/synapse/v1/errors_pb.js";
import {
  AgentHealth,
  CapabilityHealth,
  RegisteredAgentSchema,
  type AgentRegistrationPayload,
  type RegisteredAgent,
} from "../../gen/synapse/v1/registry_pb.js";
import { complianceAtLeast, evaluateCompliance } from "../capabilities/compliance.js";
import { bytesEqual } from "../crypto/encoding.js";
import { isSelfCertifying, selfCertifyingAgentId } from "../crypto/keys.js";
import type { OpenedEnvelope } from "../envelope/open.js";
import type { TrustPolicy, TrustVerdict } from "../envelope/trust.js";
import type { Logger } from "../log.js";
import { outboundUrlProblem } from "../net/outbound-url.js";
import { clip, errorDetail, protocolError } from "../protocol/errors.js";
import type { DirectoryEntry, DirectoryStorage } from "../store/registry-storage.js";
import { checkGovernance, type CapabilityCatalogue } from "./catalogue.js";
import type { RegistrationGate } from "./registration-limits.js";

/** What the registry learns by calling an agent back at its endpoint. */
export interface AgentSelfReport {
  capabilities: AgentCapabilities;
  interfaces: ImplementedInterface[];
}

export interface DirectoryOptions {
  catalogue: CapabilityCatalogue;
  /** Where entries live (shared by every registry instance on one store). */
  storage: DirectoryStorage;
  /** Calls the agent's GetCapabilities and GetSupportedInterfaces. */
  confirm: (endpointUrl: string) => Promise<AgentSelfReport>;
  logger: Logger;
  /** A lease lasts this long after each heartbeat. */
  leaseMs: number;
  /** An agent whose lease has expired this long ago is dropped. */
  dropAfterMs: number;
  /**
   * The operator's bindings of agent ids to keys (the hosting server's trust
   * store): an id the directory does not hold may be registered with the key
   * bound to it here, whatever the form of the id.
   */
  bindings?: TrustPolicy;
  /**
   * Lets anyone register any id the directory does not hold, with whatever
   * key signs first. For closed or development networks only.
   */
  openNames?: boolean;
  /** Bounds new registrations of ids the operator did not bind (a total and a rate); none: unbounded. */
  gate?: RegistrationGate;
  now?: () => number;
}

/** How a registration's signer may hold its id: its own entry already, bound by the operator, or neither (anyone's fresh key). */
type Claim = "own" | "bound" | "untrusted";

export interface AgentQuery {
  taskType?: string;
  capability?: string;
  contentType?: string;
  transportMode?: TransportMode;
  interfaceName?: string;
  minCompliance?: Compliance;
  includeUnhealthy?: boolean;
  pageSize: number;
  pageToken?: string;
}

const REGISTRY_ACTOR = "registry";

export class AgentDirectory implements TrustPolicy {
  private readonly now: () => number;
  private readonly storage: DirectoryStorage;

  constructor(private readonly options: DirectoryOptions) {
    this.now = options.now ?? Date.now;
    this.storage = options.storage;
  }

  // ── the key directory ──────────────────────────────────────────────────

  async publicKeyFor(keyId: string): Promise<Uint8Array | undefined> {
    return (await this.storage.findAgentByKeyId(keyId))?.publicKey;
  }

  async check(agentId: string, keyId: string): Promise<TrustVerdict> {
    const entry = await this.storage.getAgent(agentId);
    if (entry === undefined) return { kind: "unknown" };
    return entry.keyId === keyId ? { kind: "trusted" } : { kind: "conflict", expectedKeyId: entry.keyId };
  }

  /**
   * The trust policy for registry messages: a registered id keeps its key.
   * An unregistered one passes here: Register decides whether its signer may
   * claim it (requireClaim), and Heartbeat and Deregister find it unregistered.
   */
  readonly registrationTrust: TrustPolicy = {
    publicKeyFor: (keyId) => this.publicKeyFor(keyId),
    check: async (agentId, keyId) => {
      const verdict = await this.check(agentId, keyId);
      return verdict.kind === "unknown" ? { kind: "trusted" } : verdict;
    },
  };

  // ── registration and leases ────────────────────────────────────────────

  async register(opened: OpenedEnvelope): Promise<{ agent: RegisteredAgent; capabilityIds: string[] }> {
    const registration = opened.payload as AgentRegistrationPayload;
    const agentId = opened.header.sender!.agentId;
    const keyId = opened.header.sender!.keyId;
    const declared = registration.capabilities;
    if (declared === undefined) throw protocolError(ErrorCode.MESSAGE_FORMAT_INVALID, "capabilities are required");
    if (declared.agentId !== agentId) throw protocolError(ErrorCode.PERMISSION_DENIED, `capabilities describe ${declared.agentId}, but ${agentId} signed the registration`);
    if (declared.keyId !== keyId || !bytesEqual(registration.publicKey, opened.publicKey)) {
      throw protocolError(ErrorCode.PERMISSION_DENIED, "the registered public key is not the key that signed the registration");
    }
    // Before anything is called back: a name nobody may claim, or a stranger past the limits, costs the registry nothing.
    const claim = await this.requireClaim(agentId, keyId, opened.publicKey);
    if (claim === "untrusted") this.options.gate?.admit(await this.storage.countAgents());
    // Its form only: whether the policy allows the address is told as "no agent answered", like any unreachable endpoint.
    const endpointProblem = outboundUrlProblem(registration.endpointUrl);
    if (endpointProblem) throw protocolError(ErrorCode.INVALID_PARAMS, `endpoint_url ${JSON.stringify(registration.endpointUrl)} ${endpointProblem}`);
    // The agent's own answers at its endpoint are what gets registered (seed 000 §1.4, §6.4).
    let live: AgentSelfReport;
    try {
      live = await this.options.confirm(registration.endpointUrl);
    } catch (error) {
      throw protocolError(ErrorCode.AGENT_NOT_READY, `could not confirm the registration at ${registration.endpointUrl}: ${ConnectError.from(error).rawMessage}`, {
        status: Code.FailedPrecondition,
      });
    }
    if (live.capabilities.agentId !== agentId || live.capabilities.keyId !== keyId) {
      throw protocolError(ErrorCode.PERMISSION_DENIED, `${registration.endpointUrl} answers as ${live.capabilities.agentId} (key ${live.capabilities.keyId}), not as the registering agent`);
    }
    const { evaluation, level } = evaluateCompliance(
      live.interfaces.map((entry) => entry.name),
      agentId,
    );
    if (!evaluation.compliant) {
      const detail = errorDetail(ErrorCode.CAPABILITY_LACKING, `missing basic interfaces: ${evaluation.missingBasics.join(", ")}`, {
        details: { missing_basics: evaluation.missingBasics },
      });
      throw new ConnectError(`agent ${agentId} does not implement every basic interface: missing ${evaluation.missingBasics.join(", ")}`, Code.FailedPrecondition, undefined, [
        { desc: ErrorDetailSchema, value: detail },
        { desc: ComplianceEvaluationSchema, value: evaluation },
      ]);
    }
    const nowMs = this.now();
    const existing = await this.storage.getAgent(agentId);
    const agent = create(RegisteredAgentSchema, {
      capabilities: live.capabilities,
      interfaces: live.interfaces,
      endpointUrl: registration.endpointUrl,
      compliance: evaluation,
      complianceLevel: level,
      health: AgentHealth.HEALTHY,
      registeredAt: existing?.agent.registeredAt ?? timestampFromMs(nowMs),
      lastHeartbeatAt: timestampFromMs(nowMs),
      leaseExpiresAt: timestampFromMs(nowMs + this.options.leaseMs),
    });
    const put = await this.storage.putAgent({ agentId, keyId, publicKey: opened.publicKey, agent, leaseUntilMs: nowMs + this.options.leaseMs });
    if (put.held !== undefined) throw protocolError(ErrorCode.UNKNOWN_SENDER, `agent ${agentId} is registered with another key`);
    // Registrations confirmed at once may together pass the total: the one that did gives its place back.
    if (claim === "untrusted" && this.options.gate !== undefined && put.entry.version === 1) {
      const held = await this.storage.countAgents();
      if (held > this.options.gate.limits.maxUntrusted) {
        await this.storage.deleteAgent(agentId, put.entry.version);
        throw this.options.gate.full(held - 1);
      }
    }
    // A task type whose governance breaks a rule is left out of the catalogue; the agent is still registered.
    const capabilities = live.capabilities.supportedTaskTypes.flatMap((taskType) => {
      const capability = this.options.catalogue.fromTaskType(agentId, taskType);
      if (capability === undefined) return [];
      try {
        checkGovernance(capability);
        return [capability];
      } catch (error) {
        this.options.logger.warn({ agent_id: agentId, task_type: taskType.type, error: ConnectError.from(error).rawMessage }, "task type not listed in the capability catalogue");
        return [];
      }
    });
    // The registration's signer owns what it lists; a lineage another key of this id owns is left out (audited).
    const capabilityIds = await this.options.catalogue.syncAgent(agentId, capabilities, { agentId, keyId });
    this.options.logger.info({ agent_id: agentId, endpoint: registration.endpointUrl, compliance: level }, "agent registered");
    return { agent, capabilityIds };
  }

  /**
   * Who may bind an id the directory does not hold: the key the operator
   * bound it to; failing an operator's binding, the key it is derived from (a
   * self-certifying id) or, on a registry that allows open names, any key.
   * An id held by this key already is its own; one held by another key is
   * refused when it is written.
   */
  private async requireClaim(agentId: string, keyId: string, publicKey: Uint8Array): Promise<Claim> {
    if ((await this.storage.getAgent(agentId))?.keyId === keyId) return "own";
    const bound = await this.options.bindings?.check(agentId, keyId, publicKey);
    if (bound?.kind === "trusted") return "bound";
    if (bound?.kind !== "conflict" && (this.options.openNames || isSelfCertifying(agentId, publicKey))) return "untrusted";
    const id = clip(agentId);
    const derived = selfCertifyingAgentId(publicKey);
    if (bound?.kind === "conflict") {
      throw protocolError(
        ErrorCode.PERMISSION_DENIED,
        `agent ${id} is bound to another key (${bound.expectedKeyId}) by this registry's operator: register it with that key, or register this key as ${derived}, the id derived from it`,
        { details: { rule: "bound_to_another_key", agent_id: id, key_id: keyId, expected_key_id: bound.expectedKeyId, derived_agent_id: derived } },
      );
    }
    throw protocolError(
      ErrorCode.PERMISSION_DENIED,
      `agent ${id} may not be registered with key ${keyId}: this registry binds a new agent id only to the key it is derived from, or to a key its operator bound it to. ` +
        `Register as ${derived} (the id derived from this key), or ask the registry's operator to bind ${id} to this key`,
      { details: { rule: "name_not_bound", agent_id: id, key_id: keyId, derived_agent_id: derived } },
    );
  }

  async heartbeat(opened: OpenedEnvelope): Promise<RegisteredAgent> {
    for (;;) {
      const entry = await this.requireOwnEntry(opened);
      const nowMs = this.now();
      const wasUnhealthy = entry.agent.health !== AgentHealth.HEALTHY;
      const agent = create(RegisteredAgentSchema, {
        ...entry.agent,
        health: AgentHealth.HEALTHY,
        lastHeartbeatAt: timestampFromMs(nowMs),
        leaseExpiresAt: timestampFromMs(nowMs + this.options.leaseMs),
      });
      // Another instance (a sweep, say) may have changed the entry meanwhile: then read it again.
      const updated = await this.storage.updateAgent({ ...entry, agent, leaseUntilMs: nowMs + this.options.leaseMs }, entry.version);
      if (updated === undefined) continue;
      if (wasUnhealthy) await this.options.catalogue.setAgentHealth(entry.agentId, CapabilityHealth.HEALTHY, REGISTRY_ACTOR, entry.keyId);
      return agent;
    }
  }

  async deregister(opened: OpenedEnvelope, reason: string): Promise<string> {
    const entry = await this.requireOwnEntry(opened);
    await this.storage.deleteAgent(entry.agentId);
    await this.options.catalogue.retireAgent(entry.agentId, reason || "deregistered", { agentId: entry.agentId, keyId: entry.keyId }, entry.keyId, { forget: true });
    this.options.logger.info({ agent_id: entry.agentId, reason }, "agent deregistered");
    return entry.agentId;
  }

  private async requireOwnEntry(opened: OpenedEnvelope): Promise<DirectoryEntry> {
    const id = opened.header.sender!.agentId;
    const entry = await this.storage.getAgent(id);
    if (entry === undefined) throw protocolError(ErrorCode.TASK_NOT_FOUND, `agent ${id} is not registered`);
    if (entry.keyId !== opened.header.sender!.keyId) throw protocolError(ErrorCode.UNKNOWN_SENDER, `agent ${id} is registered with another key`);
    return entry;
  }

  /**
   * Marks agents whose lease ran out as unhealthy and drops those gone too
   * long. Each change names the entry's version, so instances sweeping at
   * once make it once.
   */
  async sweep(): Promise<void> {
    const nowMs = this.now();
    for (const entry of await this.storage.listAgents()) {
      const id = entry.agentId;
      if (nowMs >= entry.leaseUntilMs + this.options.dropAfterMs) {
        if (!(await this.storage.deleteAgent(id, entry.version))) continue;
        await this.options.catalogue.retireAgent(id, "lease expired; dropped", REGISTRY_ACTOR, entry.keyId, { forget: true });
        this.options.logger.info({ agent_id: id }, "agent dropped after missing its heartbeats");
      } else if (nowMs >= entry.leaseUntilMs && entry.agent.health === AgentHealth.HEALTHY) {
        const agent = create(RegisteredAgentSchema, { ...entry.agent, health: AgentHealth.UNHEALTHY });
        if ((await this.storage.updateAgent({ ...entry, agent }, entry.version)) === undefined) continue;
        await this.options.catalogue.setAgentHealth(id, CapabilityHealth.UNHEALTHY, REGISTRY_ACTOR, entry.keyId);
        this.options.logger.warn({ agent_id: id }, "agent missed its heartbeat; unhealthy");
      }
    }
  }

  // ── lookups ────────────────────────────────────────────────────────────

  async get(agentId: string): Promise<RegisteredAgent> {
    const entry = await this.storage.getAgent(agentId);
    if (entry === undefined) throw protocolError(ErrorCode.TASK_NOT_FOUND, `agent ${agentId} is not registered`, { status: Code.NotFound });
    return entry.agent;
  }

  async find(query: AgentQuery): Promise<{ agents: RegisteredAgent[]; nextPageToken: string }> {
    const matches = (await this.storage.listAgents())
      .map((entry) => entry.agent)
      .filter((agent) => query.includeUnhealthy || agent.health === AgentHealth.HEALTHY)
      .filter((agent) => matchesQuery(agent, query))
      .sort((a, b) => healthOrder(a) - healthOrder(b) || a.capabilities!.agentId.localeCompare(b.capabilities!.agentId));
    const offset = query.pageToken ? decodeOffset(query.pageToken) : 0;
    const page = matches.slice(offset, offset + query.pageSize);
    const next = offset + page.length;
    return { agents: page, nextPageToken: next < matches.length ? Buffer.from(String(next)).toString("base64url") : "" };
  }
}

function healthOrder(agent: RegisteredAgent): number {
  return agent.health === AgentHealth.HEALTHY ? 0 : 1;
}

function decodeOffset(token: string): number {
  const text = /^[A-Za-z0-9_-]+$/.test(token) ? Buffer.from(token, "base64url").toString("utf8") : "";
  if (!/^\d+$/.test(text)) throw protocolError(ErrorCode.INVALID_PARAMS, "page_token is not one this registry issued");
  return Number(text);
}

function matchesQuery(agent: RegisteredAgent, query: AgentQuery): boolean {
  const caps = agent.capabilities!;
  if (query.taskType && !caps.supportedTaskTypes.some((t) => t.type === query.taskType)) return false;
  if (query.capability && !caps.supportedTaskTypes.some((t) => t.capabilities.includes(query.capability!))) return false;
  if (query.contentType && !caps.supportedContentTypes.includes(query.contentType)) return false;
  if (query.transportMode && !caps.supportedTransportModes.includes(query.transportMode)) return false;
  if (query.interfaceName && !agent.interfaces.some((i) => i.name === query.interfaceName)) return false;
  if (query.minCompliance && !complianceAtLeast(agent.complianceLevel, query.minCompliance)) return false;
  return true;
}
