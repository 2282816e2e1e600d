// A2A on a Synapse server: the A2AService implementation every binding
// calls, and the signed agent card that lists the bindings served. The
// server builds one of these per agent (server.ts) and routes to it.
import { toJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { AgentCardSchema, type A2AService, type AgentCard } from "../../gen/lf/a2a/v1/a2a_pb.js";
import type { Agent } from "../agent/agent.js";
import { agentJwks, signedAgentCard, type A2ABinding } from "./card.js";
import { convertContextOf, createA2AService, type A2AServiceDeps } from "./service.js";
import { A2APushSender } from "./push.js";
import { silentLogger, type Logger } from "../log.js";
import type { A2APushStore } from "../store/a2a-push.js";
import { MemoryA2APushStore } from "../store/memory/a2a-push.js";

export interface A2AServerOptions {
  /** Admit callers without credentials as one anonymous party. */
  open?: boolean;
  /** The task type for messages that name none, when the agent has several. */
  defaultSkill?: string;
  /** The bindings the card lists, preferred first (default all three: JSON-RPC, HTTP+JSON, gRPC). */
  bindings?: readonly A2ABinding[];
  /** The base URL clients reach the server at (default the URL it listens on). */
  publicUrl?: string;
  /** The agent's version in the card (default the package's). */
  version?: string;
  /** Where push-notification configs are kept (the server's storage; default this process's memory). */
  pushStore?: A2APushStore;
  logger?: Logger;
}

export interface A2AFace {
  readonly deps: A2AServiceDeps;
  readonly service: ServiceImpl<typeof A2AService>;
  readonly bindings: readonly A2ABinding[];
  /** The signed card as JSON, for the base URL the server is reached at. */
  cardJson(): Promise<JsonValue>;
  /** The JWK set the card's signature names (its jku). */
  jwks(): JsonObject;
  /** Tells the face where the server listens (the card's URLs, unless publicUrl is set). */
  listening(url: string): void;
  /** Stops push deliveries and gives their leases back (at shutdown; a restart resumes them). */
  close(): Promise<void>;
}

export const DEFAULT_AGENT_VERSION = "0.1.0";

export function createA2AFace(agent: Agent, draining: AbortSignal, options: A2AServerOptions = {}): A2AFace {
  const logger = options.logger ?? silentLogger;
  const pushStore = options.pushStore ?? new MemoryA2APushStore();
  const sender = new A2APushSender(agent, pushStore, convertContextOf(agent), logger);
  void sender.start().catch((error: unknown) => logger.warn({ err: error }, "could not take up A2A push notifications"));
  const deps: A2AServiceDeps = { agent, draining, open: options.open === true, defaultSkill: options.defaultSkill, push: { agent, store: pushStore, sender } };
  // Every binding this server answers: JSON-RPC and HTTP+JSON on the plain HTTP routes, gRPC on the router.
  const bindings = options.bindings ?? ["JSONRPC", "HTTP+JSON", "GRPC"];
  let baseUrl = options.publicUrl?.replace(/\/+$/, "") ?? "";
  let card: Promise<AgentCard> | undefined;
  return {
    deps,
    service: createA2AService(deps),
    bindings,
    async cardJson() {
      card ??= signedAgentCard({
        capabilities: agent.provider.getCapabilities(),
        key: agent.identity.key,
        baseUrl,
        bindings,
        open: deps.open === true,
        streaming: true,
        pushNotifications: true,
        extendedAgentCard: false,
        version: options.version ?? DEFAULT_AGENT_VERSION,
      });
      return toJson(AgentCardSchema, await card);
    },
    jwks: () => agentJwks(agent.identity.key),
    close: () => sender.close(),
    listening(url) {
      if (options.publicUrl !== undefined) return;
      baseUrl = url;
      card = undefined;
    },
  };
}
