// The console's connection to its own server: gRPC-web (binary) to the page's
// origin, the same services and checks any client gets. A Session is the
// console's identity facing one executor, with its bearer tokens.
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-web";
import { Health, HealthCheckResponse_ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";
import { CapabilitiesService, type AgentCapabilities } from "../../gen/synapse/v1/capabilities_pb.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import { GroupService } from "../../gen/synapse/v1/group_pb.js";
import { P2PService, type Task } from "../../gen/synapse/v1/p2p_pb.js";
import { RegistryService } from "../../gen/synapse/v1/registry_pb.js";
import { findErrorDetail } from "../protocol/errors.js";
import type { Executor } from "./envelopes.js";
import type { EncryptionKeyPair } from "./confidential.js";
import { keyIdOf, type ConsoleIdentity } from "./keys.js";
import { TaskKeys } from "./task-keys.js";
import { TokenCache } from "./token.js";

const transport = createGrpcWebTransport({ baseUrl: location.origin });
export const p2p = createClient(P2PService, transport);
export const capabilitiesService = createClient(CapabilitiesService, transport);
export const registryService = createClient(RegistryService, transport);
/** Group reads (A2N): the same bearer tokens as P2PService's reads. */
export const groupService = createClient(GroupService, transport);
const health = createClient(Health, transport);

/** Connection-level failures worth retrying a read or resuming a watch after. */
export const RESUMABLE = new Set([Code.Unavailable, Code.Internal, Code.Unknown, Code.Aborted, Code.DeadlineExceeded]);

export class Session {
  private readonly tokens: TokenCache;
  /** The task keys of confidential tasks, and the X25519 key they are wrapped to. */
  readonly keys: TaskKeys;

  constructor(
    readonly identity: ConsoleIdentity,
    readonly executor: Executor,
    readonly capabilities: AgentCapabilities,
    encryption: EncryptionKeyPair | undefined,
  ) {
    this.tokens = new TokenCache(identity, executor.agentId);
    this.keys = new TaskKeys(identity, encryption, async (taskId) => {
      const { task } = await p2p.getTask({ taskId }, { headers: await this.authHeaders() });
      if (task === undefined) throw new Error(`GetTask returned no task ${taskId}`);
      return task;
    });
  }

  /** Authorization for GetTask, ListTasks, Watch and ReadResult, and GroupService's reads. */
  authHeaders(): Promise<Record<string, string>> {
    return this.tokens.headers();
  }

  /** Whether a task was requested by this console's identity (and so may be steered from here). */
  owns(requesterAgentId: string | undefined): boolean {
    return requesterAgentId === this.identity.agentId;
  }

  /**
   * Whether this identity may decide the task's pending decision: one of the
   * deciders it names (an escalation level's contacts, or the requester), or
   * the requester when it names none (docs/PROTOCOL.md §5.10).
   */
  mayDecide(task: Task): boolean {
    const deciders = task.pendingDecision?.deciders ?? [];
    return deciders.length === 0 ? this.owns(task.requester?.agentId) : deciders.includes(this.identity.agentId);
  }
}

/** The executor's identity, accepted only if its key id is the thumbprint of its key. */
export async function executorOf(capabilities: AgentCapabilities): Promise<Executor> {
  if (capabilities.publicKey.byteLength !== 32) throw new Error("the agent declares no Ed25519 public key");
  if ((await keyIdOf(capabilities.publicKey)) !== capabilities.keyId) throw new Error("the agent's key id does not match its public key");
  return { agentId: capabilities.agentId, systemId: capabilities.systemId, keyId: capabilities.keyId, publicKey: capabilities.publicKey };
}

/** Whether the server hosts a registry: its standard health service knows RegistryService then. */
export async function hostsRegistry(): Promise<boolean> {
  try {
    const { status } = await health.check({ service: RegistryService.typeName });
    return status === HealthCheckResponse_ServingStatus.SERVING;
  } catch {
    return false; // NOT_FOUND: no registry here
  }
}

/** One line for people: the protocol code when the agent sent one, else the RPC status. */
export function describeError(error: unknown): string {
  if (error instanceof ConnectError) {
    const detail = findErrorDetail(error);
    const code = detail ? (detail.protocolCode || ErrorCode[detail.code] || String(detail.code)) : Code[error.code];
    return `${code}: ${detail?.message || error.rawMessage}`;
  }
  return error instanceof Error ? error.message : String(error);
}
