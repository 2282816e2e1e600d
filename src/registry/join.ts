// The agent's side of a registry: register at start (a signed
// registry:register envelope with capabilities, interfaces, endpoint and
// key), keep the lease with signed heartbeats, register again if the
// registry forgot the agent, and deregister on shutdown.
import { create } from "@bufbuild/protobuf";
import { durationMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { CapabilitiesService } from "../../gen/synapse/v1/capabilities_pb.js";
import { MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import { AgentStatus, HeartbeatPayloadSchema } from "../../gen/synapse/v1/payloads_pb.js";
import {
  AgentDeregistrationPayloadSchema,
  AgentRegistrationPayloadSchema,
  RegistryService,
  type RegisterResponse,
} from "../../gen/synapse/v1/registry_pb.js";
import type { AgentIdentity } from "../agent/identity.js";
import type { CapabilitiesProvider } from "../capabilities/provider.js";
import { createTransport, type TransportOptions } from "../client/transport.js";
import { seal } from "../envelope/seal.js";
import type { Logger } from "../log.js";
import { findErrorDetail } from "../protocol/errors.js";

export interface JoinOptions {
  registryUrl: string;
  identity: AgentIdentity;
  provider: CapabilitiesProvider;
  /** The URL other agents (and the registry's confirmation call) reach this agent at. */
  endpointUrl: string;
  logger: Logger;
  transport?: TransportOptions;
}

export interface Membership {
  readonly registryAgentId: string;
  readonly registration: RegisterResponse;
  /** Stops the heartbeats and deregisters. */
  leave(reason?: string): Promise<void>;
}

/** How long joining waits, in all, for a registry that is full or taking registrations slowly. */
const MAX_JOIN_WAIT_MS = 120_000;

/**
 * Registers, waiting out a registry's RESOURCE_EXHAUSTED (its bounds on
 * registrations it was not told to trust: a rate, a total) as long as it
 * says to, up to {@link MAX_JOIN_WAIT_MS}: agents starting together must not
 * fail because they came in the same second.
 */
async function registerWhenTaken(register: () => Promise<RegisterResponse>, logger: Logger): Promise<RegisterResponse> {
  const deadline = Date.now() + MAX_JOIN_WAIT_MS;
  for (;;) {
    try {
      return await register();
    } catch (error) {
      const refusal = ConnectError.from(error);
      const waitMs = (findErrorDetail(refusal)?.retryAfterSeconds ?? 0) * 1000;
      if (refusal.code !== Code.ResourceExhausted || waitMs === 0 || Date.now() + waitMs > deadline) throw error;
      logger.warn({ error: refusal.rawMessage, retry_after_ms: waitMs }, "the registry cannot take this registration now; trying again");
      await new Promise((resolve) => setTimeout(resolve, waitMs));
    }
  }
}

export async function joinRegistry(options: JoinOptions): Promise<Membership> {
  const transport = createTransport(options.registryUrl, options.transport);
  const registryAgent = (await createClient(CapabilitiesService, transport).getCapabilities({})).capabilities;
  if (registryAgent === undefined) throw new Error(`${options.registryUrl} did not say who it is`);
  const registry: Client<typeof RegistryService> = createClient(RegistryService, transport);
  const receiver = { agentId: registryAgent.agentId, systemId: registryAgent.systemId };
  const sender = { agentId: options.identity.agentId, systemId: options.identity.systemId };

  const register = async () => {
    const capabilities = options.provider.getCapabilities();
    const payload = create(AgentRegistrationPayloadSchema, {
      capabilities,
      interfaces: options.provider.getSupportedInterfaces(),
      endpointUrl: options.endpointUrl,
      publicKey: options.identity.key.publicKey,
    });
    const { envelope } = seal({ messageType: MessageType.REGISTRY_REGISTER, payload, sender, receiver }, options.identity.key);
    return registry.register({ envelope });
  };

  let registration = await registerWhenTaken(register, options.logger);
  options.logger.info({ registry: options.registryUrl, registry_agent: receiver.agentId }, "joined the registry");
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const beat = async () => {
    const payload = create(HeartbeatPayloadSchema, { status: AgentStatus.READY });
    const { envelope } = seal({ messageType: MessageType.HEARTBEAT, payload, sender, receiver }, options.identity.key);
    try {
      await registry.heartbeat({ envelope });
    } catch (error) {
      const connectError = ConnectError.from(error);
      if (connectError.code === Code.NotFound) {
        // The registry dropped or forgot this agent: register again.
        registration = await register().catch((again: unknown) => {
          options.logger.warn({ err: again }, "could not register again");
          return registration;
        });
      } else {
        options.logger.warn({ code: Code[connectError.code], error: connectError.rawMessage }, "registry heartbeat failed");
      }
    }
  };
  const schedule = () => {
    if (stopped) return;
    const interval = registration.heartbeatInterval ? durationMs(registration.heartbeatInterval) : 10_000;
    timer = setTimeout(() => void beat().finally(schedule), Math.max(50, interval));
    timer.unref();
  };
  schedule();

  return {
    registryAgentId: receiver.agentId,
    get registration() {
      return registration;
    },
    async leave(reason = "shutting down") {
      stopped = true;
      clearTimeout(timer);
      const payload = create(AgentDeregistrationPayloadSchema, { reason });
      const { envelope } = seal({ messageType: MessageType.REGISTRY_DEREGISTER, payload, sender, receiver }, options.identity.key);
      try {
        await registry.deregister({ envelope }, { timeoutMs: 3000 });
        options.logger.info({ registry: options.registryUrl }, "left the registry");
      } catch (error) {
        options.logger.warn({ err: error }, "could not deregister");
      }
    },
  };
}
