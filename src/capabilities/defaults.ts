// DefaultAgentCapabilities (seed 000 §2.3) and the P2PConfig defaults
// (seed 001 §5.4), the starting point every agent's configuration overrides.
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { AgentCapabilitiesSchema, TransportMode, type AgentCapabilities } from "../../gen/synapse/v1/capabilities_pb.js";
import { PROTOCOL_VERSION } from "../envelope/seal.js";

export const DEFAULT_MAX_FILE_SIZE = 10 * 1024 * 1024;

export function defaultAgentCapabilities(init: MessageInitShape<typeof AgentCapabilitiesSchema> = {}): AgentCapabilities {
  return create(AgentCapabilitiesSchema, {
    protocolVersion: PROTOCOL_VERSION,
    maxFileSize: BigInt(DEFAULT_MAX_FILE_SIZE),
    maxConcurrentTasks: 10,
    maxTaskDurationSeconds: 3600,
    supportProgressUpdates: true,
    supportStreaming: false,
    supportHil: false,
    supportGroups: false,
    supportedContentTypes: ["application/json"],
    supportedTransportModes: [TransportMode.POLLING, TransportMode.SYNC],
    ...init,
  });
}

/** Retry, timeout and heartbeat settings of the P2P protocol (seed 001 §5.4). */
export interface P2PConfig {
  maxRetries: number;
  /** Retries wait this long, doubling each time (exponential backoff) ... */
  retryBaseDelayMs: number;
  /** ... up to this long, so an endpoint that comes back is reached soon after. */
  retryMaxDelayMs: number;
  /** A task's handler is aborted after this long. */
  taskTimeoutMs: number;
  /** Idle Watch streams get a heartbeat this often. */
  heartbeatIntervalMs: number;
}

export const DEFAULT_P2P_CONFIG: Readonly<P2PConfig> = Object.freeze({
  maxRetries: 5,
  retryBaseDelayMs: 2_000,
  retryMaxDelayMs: 60_000,
  taskTimeoutMs: 5 * 60_000,
  heartbeatIntervalMs: 30_000,
});
