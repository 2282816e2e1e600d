// An agent, assembled: its identity and capabilities, the task engine that
// takes messages, the runner that runs handlers (and takes over work a
// restart or a dead instance interrupted), the reader that serves tasks,
// the callback outbox, retention, and the trust policy it checks senders
// with. The server exposes one of these over RPC.
import { create } from "@bufbuild/protobuf";
import { randomUUID } from "node:crypto";
import { AgentCapabilitiesSchema, TransportMode, type AgentCapabilities } from "../../gen/synapse/v1/capabilities_pb.js";
import { DEFAULT_P2P_CONFIG, type P2PConfig } from "../capabilities/defaults.js";
import type { Wiring } from "../capabilities/interfaces.js";
import { CapabilitiesProvider } from "../capabilities/provider.js";
import { encryptionKeyOf, EncryptionKeyRing } from "../crypto/encryption-keys.js";
import { generateX25519 } from "../crypto/hpke.js";
import { signEncryptionKey } from "../envelope/encryption-binding.js";
import { DEFAULT_CLOCK_SKEW_MS, type OpenOptions } from "../envelope/open.js";
import type { TrustPolicy } from "../envelope/trust.js";
import { silentLogger, type Logger } from "../log.js";
import { OutboundPolicy } from "../net/outbound-policy.js";
import { AgentObservers } from "../observability/agent-observer.js";
import { TimedTaskStore } from "../observability/timed-store.js";
import { MemoryTaskStore } from "../store/memory/tasks.js";
import { MemoryUploadStore } from "../store/memory/uploads.js";
import type { MessageStore, TaskStore } from "../store/store.js";
import type { UploadStore } from "../store/uploads.js";
import { CallbackSender } from "./callbacks.js";
import { TaskEngine } from "./engine.js";
import { TaskEventBus } from "./events.js";
import type { TaskHandler } from "./handler.js";
import type { AgentIdentity } from "./identity.js";
import { CallbackInbox } from "./inbox.js";
import { TaskReader } from "./reader.js";
import { EventRecorder } from "./recorder.js";
import { DEFAULT_RETENTION_MS, Retention } from "./retention.js";
import { ExecutionRunner } from "./runner.js";
import { EscalationPolicies } from "./escalation.js";
import { sealedTaskStore } from "./sealed-store.js";
import { TaskSchemas } from "./schemas.js";
import { TaskKeys } from "./task-keys.js";
import { AgentUploads, DEFAULT_UPLOAD_LIMITS, type UploadLimits } from "./uploads.js";

/** How long a lease on a task's run (or on its callbacks) lasts unless renewed. */
export const DEFAULT_LEASE_MS = 15_000;

export interface AgentOptions {
  identity: AgentIdentity;
  /** Declared capabilities; identity fields and feature flags are filled in from the agent itself. */
  capabilities: AgentCapabilities;
  handlers: ReadonlyMap<string, TaskHandler>;
  trust: TrustPolicy;
  /** Where tasks live; default this process's memory (tests and embedding). */
  store?: TaskStore;
  /** Where uploads (POST /upload) live; default this process's memory. */
  uploads?: UploadStore;
  /** Upload size limit, quotas per sender and in all, the disk's reserve and how long unused uploads are kept (see DEFAULT_UPLOAD_LIMITS). */
  uploadLimits?: Partial<UploadLimits>;
  config?: Partial<P2PConfig>;
  clockSkewMs?: number;
  logger?: Logger;
  /** How long finished tasks are kept (default 7 days). */
  retentionMs?: number;
  /** How often retention runs (default every minute). */
  pruneIntervalMs?: number;
  /** Other remembered messages retention should prune (a registry's). */
  prunedMessages?: MessageStore[];
  /** Lease length for runs and callback pushes (default 15 s); others take over this long after an instance dies. */
  leaseMs?: number;
  /**
   * The agent also serves GroupService (see src/group/group-host.ts): it then
   * declares support_groups and the group interfaces.
   */
  groups?: boolean;
  /** This process among the instances sharing the store; default a random id. */
  instanceId?: string;
  /** Where callbacks may go; by default public addresses, and loopback while the server listens on loopback only. */
  outbound?: OutboundPolicy;
  /**
   * The operator's key ids (RFC 7638 thumbprints): a bearer token signed by
   * one of these keys may read every task (GetTask, ListTasks, Watch,
   * ReadResult), never steer one.
   */
  operators?: readonly string[];
  now?: () => number;
}

export interface Agent {
  readonly identity: AgentIdentity;
  /** How its services open the envelopes sent to it: its trust, its id and key, the clock skew, and the keys of confidential tasks. */
  readonly openOptions: OpenOptions;
  /** The task keys of its confidential tasks. */
  readonly keys: TaskKeys;
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
  /** Its store, with commits timed for the observers. */
  readonly store: TaskStore;
  /** Uploaded files, their limits, and the check of the references tasks make to them. */
  readonly uploads: AgentUploads;
  readonly instanceId: string;
  /** Who is told of its messages, transitions, callback pushes and store writes (the server's metrics). */
  readonly observers: AgentObservers;
  /** Key ids whose bearer tokens may read every task (AgentOptions.operators). */
  readonly operatorKeyIds: ReadonlySet<string>;
  /** Takes over interrupted work and starts the background duties; call before serving. */
  start(): Promise<void>;
  /** Stops taking work, stops runs (see ExecutionRunner.shutdown) and the background duties. */
  stop(): Promise<void>;
}

/** What an agent with a task engine implements, for GetSupportedInterfaces. */
export const AGENT_WIRING: Wiring = {
  capabilities: true,
  p2p: true,
  taskStatus: true,
  streaming: true,
  humanInTheLoop: true,
  callbacks: true,
  escalation: true,
  multipart: true,
  sse: true,
};

export function createAgent(options: AgentOptions): Agent {
  const { identity } = options;
  const config: P2PConfig = { ...DEFAULT_P2P_CONFIG, ...options.config };
  const clockSkewMs = options.clockSkewMs ?? DEFAULT_CLOCK_SKEW_MS;
  const logger = options.logger ?? silentLogger;
  const now = options.now ?? Date.now;
  const declared = options.capabilities;
  const encryption = identity.encryption ?? new EncryptionKeyRing(encryptionKeyOf(generateX25519(), now()));
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
    supportGroups: options.groups === true,
    // Each bound to the identity key by its signature, so no one who relays the capabilities can swap it.
    encryptionKeys: encryption.published(now()).map((key) => signEncryptionKey(identity.agentId, identity.key, key)),
  });
  const provider = new CapabilitiesProvider(capabilities, { ...AGENT_WIRING, groups: options.groups === true });
  const observers = new AgentObservers();
  const keys = new TaskKeys(identity.agentId, identity.key.keyId, encryption, now);
  const store = new TimedTaskStore(sealedTaskStore(options.store ?? new MemoryTaskStore(now), keys), observers);
  const instanceId = options.instanceId ?? randomUUID();
  const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
  const uploads = new AgentUploads(options.uploads ?? new MemoryUploadStore(store), { ...DEFAULT_UPLOAD_LIMITS, ...options.uploadLimits }, now);
  const bus = new TaskEventBus(store);
  const schemas = new TaskSchemas(capabilities.supportedTaskTypes);
  const escalation = new EscalationPolicies(capabilities.supportedTaskTypes);
  const recorder = new EventRecorder({ identity, capabilities: provider, store, now, observer: observers, keys });
  const runner = new ExecutionRunner({ capabilities: provider, handlers: options.handlers, schemas, store, bus, recorder, config, logger, now, instanceId, leaseMs, uploads, escalation, keys });
  const outbound = options.outbound ?? new OutboundPolicy();
  const callbacks = new CallbackSender({
    store,
    bus,
    logger,
    outbound,
    maxRetries: config.maxRetries,
    retryBaseDelayMs: config.retryBaseDelayMs,
    retryMaxDelayMs: config.retryMaxDelayMs,
    instanceId,
    leaseMs,
    now,
    observer: observers,
  });
  const inbox = new CallbackInbox(store, bus, options.trust);
  const engine = new TaskEngine({ keys, capabilities: provider, handlers: options.handlers, schemas, store, bus, recorder, runner, callbacks, outbound, logger, clockSkewMs, now, inbox, uploads, observer: observers });
  const reader = new TaskReader({
    store,
    bus,
    heartbeatIntervalMs: config.heartbeatIntervalMs,
    heartbeat: (receiver, task) => engine.sealHeartbeat(receiver, task.carried),
    observer: observers,
  });
  const retention = new Retention({
    store,
    uploads,
    messages: options.prunedMessages,
    retentionMs: options.retentionMs ?? DEFAULT_RETENTION_MS,
    intervalMs: options.pruneIntervalMs ?? 60_000,
    logger,
    now,
  });
  let started: Promise<void> | undefined;
  let stopped: Promise<void> | undefined;
  const openOptions: OpenOptions = {
    trust: options.trust,
    self: identity.agentId,
    selfKeyId: identity.key.keyId,
    clockSkewMs,
    confidential: keys.opener(
      (taskId) => store.getTask(taskId),
      (executorAgentId, taskId) => store.getOutbound(executorAgentId, taskId),
    ),
  };
  return {
    // With the encryption keys it uses, so that a client with this identity (a callback requester) holds them too.
    identity: identity.encryption === encryption ? identity : { ...identity, encryption },
    openOptions,
    keys,
    provider,
    engine,
    reader,
    inbox,
    trust: options.trust,
    outbound,
    config,
    clockSkewMs,
    store,
    uploads,
    instanceId,
    observers,
    operatorKeyIds: new Set(options.operators ?? []),
    start() {
      started ??= (async () => {
        await runner.start();
        await callbacks.start();
        retention.start();
      })();
      return started;
    },
    stop() {
      stopped ??= (async () => {
        await engine.shutdown();
        await callbacks.close();
        await retention.stop();
        bus.close();
      })();
      return stopped;
    },
  };
}
