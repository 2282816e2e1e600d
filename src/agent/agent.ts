// An agent, assembled: its identity and capabilities, the task engine that
// runs its handlers, the reader that serves its tasks, and the trust policy
// it checks senders with. The server exposes one of these over RPC.
import { create } from "@bufbuild/protobuf";
import { AgentCapabilitiesSchema, TransportMode, type AgentCapabilities } from "../../gen/synapse/v1/capabilities_pb.js";
import { DEFAULT_P2P_CONFIG, type P2PConfig } from "../capabilities/defaults.js";
import type { Wiring } from "../capabilities/interfaces.js";
import { CapabilitiesProvider } from "../capabilities/provider.js";
import { DEFAULT_CLOCK_SKEW_MS } from "../envelope/open.js";
import type { TrustPolicy } from "../envelope/trust.js";
import { silentLogger, type Logger } from "../log.js";
import { OutboundPolicy } from "../net/outbound-policy.js";
import { MemoryStore } from "../store/memory.js";
import type { Store } from "../store/store.js";
import { CallbackSender } from "./callbacks.js";
import { TaskEngine } from "./engine.js";
import { TaskEventBus } from "./events.js";
import type { TaskHandler } from "./handler.js";
import type { AgentIdentity } from "./identity.js";
import { CallbackInbox } from "./inbox.js";
import { TaskReader } from "./reader.js";
import { TaskSchemas } from "./schemas.js";

export interface AgentOptions {
  identity: AgentIdentity;
  /** Declared capabilities; identity fields and feature flags are filled in from the agent itself. */
  capabilities: AgentCapabilities;
  handlers: ReadonlyMap<string, TaskHandler>;
  trust: TrustPolicy;
  store?: Store;
  config?: Partial<P2PConfig>;
  clockSkewMs?: number;
  logger?: Logger;
  /** Where callbacks may go; by default public addresses, and loopback while the server listens on loopback only. */
  outbound?: OutboundPolicy;
}

export interface Agent {
  readonly identity: AgentIdentity;
  readonly provider: CapabilitiesProvider;
  readonly engine: TaskEngine;
  readonly reader: TaskReader;
  /** Events pushed back for tasks this agent requested from others (CallbackReceiver). */
  readonly inbox: CallbackInbox;
  readonly trust: TrustPolicy;
  /** The outbound policy of its callbacks; the server tells it where it listens. */
  readonly outbound: OutboundPolicy;
  readonly config: P2PConfig;
  readonly clockSkewMs: number;
}

/** What an agent with a task engine implements, for GetSupportedInterfaces. */
export const AGENT_WIRING: Wiring = { capabilities: true, p2p: true, taskStatus: true, streaming: true, humanInTheLoop: true, callbacks: true };

export function createAgent(options: AgentOptions): Agent {
  const { identity } = options;
  const config: P2PConfig = { ...DEFAULT_P2P_CONFIG, ...options.config };
  const clockSkewMs = options.clockSkewMs ?? DEFAULT_CLOCK_SKEW_MS;
  const logger = options.logger ?? silentLogger;
  const declared = options.capabilities;
  const capabilities = create(AgentCapabilitiesSchema, {
    ...declared,
    agentId: identity.agentId,
    agentName: declared.agentName || identity.agentName,
    systemId: identity.systemId,
    publicKey: identity.key.publicKey,
    keyId: identity.key.keyId,
    // Only task types with a handler are offered.
    supportedTaskTypes: declared.supportedTaskTypes.filter((taskType) => options.handlers.has(taskType.type)),
    supportedTransportModes: [TransportMode.SYNC, TransportMode.POLLING, TransportMode.CALLBACK, TransportMode.HYBRID],
    supportProgressUpdates: true,
    supportStreaming: true,
    supportHil: true,
  });
  const provider = new CapabilitiesProvider(capabilities, AGENT_WIRING);
  const store = options.store ?? new MemoryStore();
  const bus = new TaskEventBus();
  const schemas = new TaskSchemas(capabilities.supportedTaskTypes);
  const outbound = options.outbound ?? new OutboundPolicy();
  const callbacks = new CallbackSender({ store, bus, logger, outbound, maxRetries: config.maxRetries, retryBaseDelayMs: config.retryBaseDelayMs });
  const inbox = new CallbackInbox(store);
  const engine = new TaskEngine({ identity, capabilities: provider, handlers: options.handlers, schemas, store, bus, config, logger, clockSkewMs, callbacks, outbound, inbox });
  const reader = new TaskReader({
    store,
    bus,
    heartbeatIntervalMs: config.heartbeatIntervalMs,
    heartbeat: (task) => engine.sealHeartbeat(task.requester),
  });
  return { identity, provider, engine, reader, inbox, trust: options.trust, outbound, config, clockSkewMs };
}
