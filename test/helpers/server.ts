// Starts a real agent server on an ephemeral port with a fresh identity,
// and makes requester identities and clients for it.
import type { MessageInitShape } from "@bufbuild/protobuf";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AgentCapabilitiesSchema } from "../../gen/synapse/v1/capabilities_pb.js";
import { createAgent, type Agent } from "../../src/agent/agent.js";
import type { TaskHandler } from "../../src/agent/handler.js";
import type { UploadLimits } from "../../src/agent/uploads.js";
import { loadOrCreateIdentity, type AgentIdentity } from "../../src/agent/identity.js";
import { referenceHandlers } from "../../src/agent/reference/index.js";
import { REFERENCE_TASK_TYPES } from "../../src/agent/reference/task-types.js";
import { defaultAgentCapabilities, type P2PConfig } from "../../src/capabilities/defaults.js";
import { SynapseClient, type ClientOptions } from "../../src/client/requester.js";
import type { TrustPolicy } from "../../src/envelope/trust.js";
import { PinnedKeys, TrustChain } from "../../src/envelope/trust-sources.js";
import { silentLogger } from "../../src/log.js";
import type { OutboundPolicy } from "../../src/net/outbound-policy.js";
import { Registry } from "../../src/registry/registry.js";
import { DirectoryTrust } from "../../src/registry/registry-trust.js";
import { memoryStorage } from "../../src/store/memory/index.js";
import { startServer, type RunningServer, type ServerOptions } from "../../src/server/server.js";
import type { Storage } from "../../src/store/storage.js";

export async function tempDir(prefix = "synapse-test-"): Promise<string> {
  return mkdtemp(join(tmpdir(), prefix));
}

export interface TestServerOptions extends Partial<Omit<ServerOptions, "capabilities" | "agent" | "registry">> {
  maxFileSize?: number;
  agentId?: string;
  capabilities?: MessageInitShape<typeof AgentCapabilitiesSchema>;
  handlers?: ReadonlyMap<string, TaskHandler>;
  config?: Partial<P2PConfig>;
  trust?: TrustPolicy;
  clockSkewMs?: number;
  /**
   * Host a registry beside the agent; `bindings` are the operator's bindings
   * of ids to keys (a trust store), `openNames` lets any key claim a new id.
   */
  registry?: { leaseMs?: number; dropAfterMs?: number; admins?: readonly string[]; bindings?: TrustPolicy; openNames?: boolean };
  /** The outbound policy of the agent's callbacks and the registry's confirmations. */
  outbound?: OutboundPolicy;
  /** Retention of finished tasks, and how often it runs. */
  retentionMs?: number;
  pruneIntervalMs?: number;
  /** The agent's identity (default a fresh one): instances of one agent share it. */
  identity?: AgentIdentity;
  /** Where tasks, pins and the registry live (default memory). */
  storage?: Storage;
  /** Operator key ids: their bearer tokens read every task. */
  operators?: readonly string[];
  /** Upload limit, quota and keep period. */
  uploadLimits?: Partial<UploadLimits>;
}

export interface TestServer extends RunningServer {
  agent: Agent;
  registry?: Registry;
}

export async function startTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  const identity = options.identity ?? (await loadOrCreateIdentity(await tempDir(), { agentId: options.agentId })).identity;
  const capabilities = defaultAgentCapabilities({
    agentName: "test agent",
    supportedTaskTypes: [...REFERENCE_TASK_TYPES],
    ...(options.maxFileSize !== undefined ? { maxFileSize: BigInt(options.maxFileSize) } : {}),
    ...options.capabilities,
  });
  // A hosted registry keeps its state beside the agent's, and vouches for the agents registered with it.
  const storage = options.storage ?? (options.registry ? memoryStorage() : undefined);
  const pinned = storage ? new PinnedKeys(storage.pins) : PinnedKeys.inMemory();
  const defaultTrust = options.registry && storage ? new TrustChain([new DirectoryTrust(storage.directory), pinned]) : pinned;
  const agent = createAgent({
    identity,
    capabilities,
    handlers: options.handlers ?? referenceHandlers(),
    trust: options.trust ?? defaultTrust,
    store: storage?.tasks,
    uploads: storage?.uploads,
    uploadLimits: options.uploadLimits,
    config: options.config,
    clockSkewMs: options.clockSkewMs,
    logger: options.logger,
    outbound: options.outbound,
    retentionMs: options.retentionMs,
    pruneIntervalMs: options.pruneIntervalMs,
    operators: options.operators,
  });
  const registry = options.registry
    ? new Registry({
        logger: silentLogger,
        clockSkewMs: agent.clockSkewMs,
        leaseMs: options.registry.leaseMs,
        dropAfterMs: options.registry.dropAfterMs,
        admins: options.registry.admins,
        bindings: options.registry.bindings,
        openNames: options.registry.openNames,
        outbound: agent.outbound,
        storage: storage ? { directory: storage.directory, catalogue: storage.catalogue, messages: storage.tasks } : undefined,
      })
    : undefined;
  const { maxConnections, headerTimeoutMs, bodyTimeoutMs, idleTimeoutMs, writeTimeoutMs } = options;
  const limits = { maxConnections, headerTimeoutMs, bodyTimeoutMs, idleTimeoutMs, writeTimeoutMs };
  const server = await startServer({
    tls: options.tls,
    logger: options.logger,
    shutdownGraceMs: options.shutdownGraceMs,
    sseHeartbeatMs: options.sseHeartbeatMs,
    agent,
    registry,
    port: 0,
    host: options.host ?? "127.0.0.1",
    metrics: options.metrics,
    a2a: options.a2a && { pushStore: storage?.a2aPush, ...options.a2a },
    ...limits,
  });
  return Object.assign(server, { agent, registry });
}

/** A fresh requester identity in a temporary SYNAPSE_HOME. */
export async function requesterIdentity(agentId?: string): Promise<AgentIdentity> {
  return (await loadOrCreateIdentity(await tempDir("synapse-requester-"), { agentId })).identity;
}

export async function connectClient(server: RunningServer, options: Partial<ClientOptions> = {}): Promise<SynapseClient> {
  return SynapseClient.connect({
    baseUrl: server.url,
    identity: options.identity ?? (await requesterIdentity()),
    retryBaseDelayMs: 50,
    ...options,
  });
}
