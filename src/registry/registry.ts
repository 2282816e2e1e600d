// A registry, assembled: the agent directory with its lease sweeper, the
// governed capability catalogue, the memory of registry messages already
// seen (so a captured registration or withdrawal cannot be replayed), and
// how registrations are confirmed (calling the agent back).
import { createClient } from "@connectrpc/connect";
import { CapabilitiesService } from "../../gen/synapse/v1/capabilities_pb.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import type { OpenedEnvelope } from "../envelope/open.js";
import type { TrustPolicy } from "../envelope/trust.js";
import type { Logger } from "../log.js";
import { createOutboundTransport } from "../net/outbound-client.js";
import { OutboundPolicy } from "../net/outbound-policy.js";
import { protocolError } from "../protocol/errors.js";
import { memoryStorage } from "../store/memory/index.js";
import type { CatalogueStorage, DirectoryStorage } from "../store/registry-storage.js";
import type { MessageStore } from "../store/store.js";
import { CapabilityCatalogue } from "./catalogue.js";
import { AgentDirectory, type AgentSelfReport } from "./directory.js";
import { DEFAULT_REGISTRATION_LIMITS, RegistrationGate, type RegistrationLimits } from "./registration-limits.js";

export interface RegistryOptions {
  logger: Logger;
  /** Where the directory, the catalogue and the memory of registry messages live; default this process's memory. */
  storage?: { directory: DirectoryStorage; catalogue: CatalogueStorage; messages: MessageStore };
  /** Lease length; heartbeats are asked for at a third of it. Default 30 s. */
  leaseMs?: number;
  /** How long after its lease an agent is dropped. Default three leases. */
  dropAfterMs?: number;
  clockSkewMs: number;
  /** How registrations are confirmed; by default GetCapabilities and GetSupportedInterfaces at the endpoint. */
  confirm?: (endpointUrl: string) => Promise<AgentSelfReport>;
  /**
   * Key ids (RFC 7638 thumbprints) of the registry's operators: they may
   * change any capability and the permission grants. Every instance sharing
   * a store should name the same ones.
   */
  admins?: readonly string[];
  /** Where confirmation calls may go; by default public addresses, and loopback while the server listens on loopback only. */
  outbound?: OutboundPolicy;
  /**
   * The operator's bindings of agent ids to keys (the hosting server's trust
   * store). An id the directory does not hold is registered only with the key
   * it is derived from (a self-certifying id) or the key bound to it here.
   */
  bindings?: TrustPolicy;
  /**
   * Lets any id the directory does not hold be registered with whatever key
   * signs first (names are first-come). For closed or development networks only.
   */
  openNames?: boolean;
  /**
   * Registrations of ids the operator did not bind (anyone's fresh key):
   * taken while the directory holds fewer than `maxUntrusted` agents (default
   * 1000), at most `ratePerSecond` new ones a second (default 20).
   */
  limits?: Partial<RegistrationLimits>;
  /** How long the catalogue's audit events are kept (default 7 days). */
  auditRetentionMs?: number;
  now?: () => number;
}

/** Audit events deleted per sweep at most: a long backlog goes over several. */
const AUDIT_PRUNE_BATCH = 1000;

/**
 * Calls the agent back at its endpoint (seed 000 §1.4: the registry calls
 * GetCapabilities). Opaque: whatever goes wrong, the registrant learns only
 * that no agent answered, so the registry is no port scanner; the log says why.
 */
export async function confirmAtEndpoint(endpointUrl: string, policy: OutboundPolicy, logger: Logger): Promise<AgentSelfReport> {
  const transport = createOutboundTransport(endpointUrl, { policy, logger, purpose: "registry confirmation", opaque: true });
  try {
    const client = createClient(CapabilitiesService, transport);
    // One after the other: the first call finds out whether an endpoint is gRPC-only.
    const { capabilities } = await client.getCapabilities({}, { timeoutMs: 5000 });
    const { interfaces } = await client.getSupportedInterfaces({}, { timeoutMs: 5000 });
    if (capabilities === undefined) throw protocolError(ErrorCode.MESSAGE_FORMAT_INVALID, "the agent sent no capabilities");
    return { capabilities, interfaces };
  } finally {
    transport.close();
  }
}

export class Registry {
  readonly catalogue: CapabilityCatalogue;
  readonly directory: AgentDirectory;
  readonly outbound: OutboundPolicy;
  readonly leaseMs: number;
  /** Registry messages already taken (pruned with the agent's own, by its retention). */
  readonly messages: MessageStore;
  private readonly sweeper: NodeJS.Timeout;
  private sweeping: Promise<void> | undefined;
  private readonly now: () => number;

  constructor(private readonly options: RegistryOptions) {
    this.now = options.now ?? Date.now;
    this.leaseMs = options.leaseMs ?? 30_000;
    this.outbound = options.outbound ?? new OutboundPolicy();
    const storage = options.storage ?? (() => {
      const memory = memoryStorage(this.now);
      return { directory: memory.directory, catalogue: memory.catalogue, messages: memory.tasks };
    })();
    this.messages = storage.messages;
    this.catalogue = new CapabilityCatalogue({ now: this.now, storage: storage.catalogue, admins: options.admins, logger: options.logger });
    this.directory = new AgentDirectory({
      storage: storage.directory,
      catalogue: this.catalogue,
      confirm: options.confirm ?? ((endpointUrl) => confirmAtEndpoint(endpointUrl, this.outbound, options.logger)),
      logger: options.logger,
      leaseMs: this.leaseMs,
      dropAfterMs: options.dropAfterMs ?? 3 * this.leaseMs,
      bindings: options.bindings,
      openNames: options.openNames,
      gate: new RegistrationGate({ ...DEFAULT_REGISTRATION_LIMITS, ...options.limits }, this.now),
      now: this.now,
    });
    const auditRetentionMs = options.auditRetentionMs ?? 7 * 24 * 3600 * 1000;
    this.sweeper = setInterval(() => {
      this.sweeping ??= this.directory
        .sweep()
        .then(async () => void (await this.catalogue.pruneAudit(this.now() - auditRetentionMs, AUDIT_PRUNE_BATCH)))
        .catch((error: unknown) => options.logger.warn({ err: error }, "sweeping the directory failed"))
        .finally(() => (this.sweeping = undefined));
    }, Math.max(50, Math.floor(this.leaseMs / 4)));
    this.sweeper.unref();
  }

  /** How often an agent should send a heartbeat. */
  get heartbeatIntervalMs(): number {
    return Math.floor(this.leaseMs / 3);
  }

  /**
   * Refuses a registry message whose id was used before (an exact
   * re-delivery is refused too: these are not idempotent). Remembered in
   * the store, so a restart or another registry instance refuses it too.
   */
  async remember(opened: OpenedEnvelope): Promise<void> {
    const id = opened.header.messageId;
    const expiresAtMs = opened.header.expiresAt ? Number(opened.header.expiresAt.seconds) * 1000 : this.now();
    const earlier = await this.messages.rememberMessage({
      scope: "registry",
      messageId: id,
      senderAgentId: opened.header.sender!.agentId,
      digest: opened.digest,
      keepUntilMs: expiresAtMs + this.options.clockSkewMs,
    });
    if (earlier !== undefined) throw protocolError(ErrorCode.REPLAY_DETECTED, `message id ${id} was already used`);
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    await this.sweeping;
  }
}
