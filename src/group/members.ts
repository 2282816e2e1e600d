// Talking to member agents: every call goes through the host's outbound
// policy (the same as callbacks), and the agent that answers at a member's
// endpoint must be that member, with the key that signed its consent.
import { Code, createClient } from "@connectrpc/connect";
import { CapabilitiesService } from "../../gen/synapse/v1/capabilities_pb.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import type { GroupMember } from "../../gen/synapse/v1/a2n_pb.js";
import type { AgentIdentity } from "../agent/identity.js";
import { SynapseClient } from "../client/requester.js";
import type { TrustPolicy } from "../envelope/trust.js";
import type { Logger } from "../log.js";
import { createOutboundTransport, OUTBOUND_UNREACHABLE, type OutboundTransport } from "../net/outbound-client.js";
import type { OutboundPolicy } from "../net/outbound-policy.js";
import { clip, protocolError } from "../protocol/errors.js";

const CONFIRM_TIMEOUT_MS = 5000;

/** Trusts exactly one agent with exactly one key: the member as the group knows it. */
function memberTrust(agentId: string, keyId: string): TrustPolicy {
  return {
    publicKeyFor: () => undefined,
    check: (id, key) => (id !== agentId ? { kind: "unknown" } : key === keyId ? { kind: "trusted" } : { kind: "conflict", expectedKeyId: keyId }),
  };
}

interface Connection {
  endpointUrl: string;
  keyId: string;
  transport: OutboundTransport;
  client: Promise<SynapseClient>;
}

export class MemberConnector {
  private readonly connections = new Map<string, Connection>();

  constructor(
    private readonly identity: AgentIdentity,
    private readonly policy: OutboundPolicy,
    private readonly logger: Logger,
  ) {}

  /** Refuses an endpoint URL of the wrong form, or one the outbound policy refuses by its literal host. */
  checkUrl(endpointUrl: string): void {
    const problem = this.policy.urlProblem(endpointUrl);
    if (problem !== undefined) {
      throw protocolError(ErrorCode.INVALID_PARAMS, `endpoint_url ${JSON.stringify(clip(endpointUrl))} ${problem}`, { details: { field: "endpoint_url" } });
    }
  }

  /**
   * Calls GetCapabilities at the endpoint: the agent there must be `agentId`
   * with `keyId`. Whatever else goes wrong, the sender learns only that no
   * agent answered there (the host is no port scanner); the log says why.
   */
  async confirm(endpointUrl: string, agentId: string, keyId: string): Promise<void> {
    this.checkUrl(endpointUrl);
    const transport = createOutboundTransport(endpointUrl, { policy: this.policy, logger: this.logger, purpose: "group member confirmation", opaque: true });
    let answered: { agentId: string; keyId: string } | undefined;
    try {
      answered = (await createClient(CapabilitiesService, transport).getCapabilities({}, { timeoutMs: CONFIRM_TIMEOUT_MS })).capabilities;
    } catch {
      throw protocolError(ErrorCode.AGENT_NOT_READY, `could not confirm the endpoint ${clip(endpointUrl)}: ${OUTBOUND_UNREACHABLE}`, { status: Code.FailedPrecondition });
    } finally {
      transport.close();
    }
    if (answered?.agentId !== agentId || answered.keyId !== keyId) {
      throw protocolError(ErrorCode.PERMISSION_DENIED, `the agent at ${clip(endpointUrl)} is not ${clip(agentId)} with key ${clip(keyId)}`, {
        details: { rule: "endpoint_is_another_agent" },
      });
    }
  }

  /** A client for the member's P2PService (kept while its endpoint and key stay the same). */
  client(member: GroupMember): Promise<SynapseClient> {
    const agentId = member.agent!.agentId;
    const keyId = member.agent!.keyId;
    const existing = this.connections.get(agentId);
    if (existing !== undefined && existing.endpointUrl === member.endpointUrl && existing.keyId === keyId) return existing.client;
    existing?.transport.close();
    const transport = createOutboundTransport(member.endpointUrl, { policy: this.policy, logger: this.logger, purpose: "group sub-task", keepAlive: true });
    const client = SynapseClient.connect({
      baseUrl: member.endpointUrl,
      identity: this.identity,
      rpcTransport: transport,
      trust: memberTrust(agentId, keyId),
      connectTimeoutMs: CONFIRM_TIMEOUT_MS,
      maxRetries: 3,
      retryBaseDelayMs: 200,
    });
    const connection: Connection = { endpointUrl: member.endpointUrl, keyId, transport, client };
    this.connections.set(agentId, connection);
    // A failed connect is not kept: the next call tries again.
    client.catch(() => {
      if (this.connections.get(agentId) === connection) {
        this.connections.delete(agentId);
        transport.close();
      }
    });
    return client;
  }

  close(): void {
    for (const connection of this.connections.values()) connection.transport.close();
    this.connections.clear();
  }
}
