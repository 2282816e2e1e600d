// createAgent for the server entry point: turns handlers (functions or
// described objects) into an agent with declared capabilities, and wraps the
// internal Agent in the small SynapseAgent interface users mount.
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import type { ConnectRouter } from "@connectrpc/connect";
import type { ConnectNodeAdapterOptions } from "@connectrpc/connect-node";
import { setMaxListeners } from "node:events";
import { basename, resolve } from "node:path";
import { CapabilitiesService, SupportedTaskTypeSchema, type AgentCapabilities, type AgentCapabilitiesSchema } from "../../gen/synapse/v1/capabilities_pb.js";
import { P2PService } from "../../gen/synapse/v1/p2p_pb.js";
import { createAgent as assembleAgent, type Agent } from "../agent/agent.js";
import { loadOrCreateIdentity, type AgentIdentity } from "../agent/identity.js";
import type { CallbackInbox } from "../agent/inbox.js";
import { defaultAgentCapabilities } from "../capabilities/defaults.js";
import { PinnedKeys } from "../envelope/trust-sources.js";
import type { TrustPolicy } from "../envelope/trust.js";
import type { Storage } from "../store/storage.js";
import type { UploadLimits } from "../agent/uploads.js";
import { createLogger, type Logger } from "../log.js";
import { OutboundPolicy } from "../net/outbound-policy.js";
import { createRequestHandler } from "../server/adapter.js";
import { capabilitiesService } from "../server/capabilities-service.js";
import { shapeErrors } from "../server/error-shape.js";
import { ServerHealth } from "../server/health.js";
import { p2pService } from "../server/p2p-service.js";
import { registerReflection } from "../server/reflection.js";
import { httpRoutes } from "../server/http-routes.js";
import { withRequestLog } from "../server/request-log.js";
import { MESSAGE_OVERHEAD_BYTES } from "../server/server.js";
import { createIdentity } from "./index.js";
import { declarationOf, handlerOf, type HandlerDefinition } from "./handlers.js";
import { DEFAULT_DATA_DIR, openStore, storageOf, type Store, type StoreSpec } from "./store.js";

/** Options of {@link createAgent} (and {@link serveAgent}). Only `handlers` is required. */
export interface AgentOptions {
  /**
   * The task types this agent runs, each with its handler: the keys are the
   * task types (`TaskSpec.type`), in snake_case.
   */
  handlers: Record<string, HandlerDefinition>;
  /**
   * Where the agent keeps its key (`agent.key`, `identity.json`) and, by
   * default, its SQLite store (`synapse.db`). Default `.synapse`.
   */
  dataDir?: string;
  /**
   * Where the agent keeps its state: a {@link StoreSpec} (opened here, and
   * closed with the agent) or a {@link Store} from {@link openStore} (yours
   * to close). Default `"sqlite"`, in `dataDir`.
   */
  store?: StoreSpec | Store;
  /**
   * Who the agent is. Default: loaded from `dataDir`, or created and saved
   * there on first start; with `store: "memory"` and no `dataDir`, a new
   * identity kept in memory only.
   */
  identity?: AgentIdentity;
  /**
   * The agent's human-readable name (declared in its capabilities), when its
   * identity is loaded or created here. Default: the name its identity.json
   * keeps, else the data dir's name without leading dots (`"./.my-agent"`:
   * `my-agent`), else, for the default data dir or none, its task types
   * (`"shout, translate agent"`).
   */
  agentName?: string;
  /**
   * Whose keys are believed. Default: each sender's key is pinned on first
   * use in the store, for ids derived from the key only
   * (`new PinnedKeys(store.pins)`). Put a `TrustStore` in front of it with a
   * `TrustChain` to name other agents (all three from `synapse-connect`).
   */
  trust?: TrustPolicy;
  /**
   * More of the agent's declared capabilities (`maxConcurrentTasks`,
   * `maxTaskDurationSeconds`, `maxFileSize`, ...). Task types are declared
   * from `handlers`; one listed here in `supportedTaskTypes` replaces the
   * declaration made from its handler.
   */
  capabilities?: MessageInitShape<typeof AgentCapabilitiesSchema>;
  /** A running handler is aborted (the task fails with `execution_timeout`) after this long; default 5 minutes. */
  taskTimeoutMs?: number;
  /** Idle Watch streams get a signed heartbeat this often; default 30 s. */
  heartbeatIntervalMs?: number;
  /** Allowed distance between a sender's clock and this one; default 5 minutes. */
  clockSkewMs?: number;
  /** Finished tasks (their events and results) are dropped this long after they end; default 7 days. */
  retentionMs?: number;
  /** How long a run's lease lasts: another instance takes over a dead one's tasks after it; default 15 s. */
  leaseMs?: number;
  /**
   * Where callbacks may go besides public addresses: CIDR blocks, addresses,
   * host names and `*.domain` wildcards. Loopback is allowed while the
   * agent's server listens on loopback only.
   */
  allowOutbound?: string[];
  /**
   * Limits on files uploaded to the agent (`POST /upload`): the largest
   * upload (default 1 GiB), what one sender's uploads may hold (1 GiB when a
   * trust store or trusted registry binds its key, 64 MiB when it is known
   * only by first use), what all senders' uploads may hold together (1 GiB),
   * how many may be in progress (4 per sender, 16 in all), the free space
   * uploads leave on the filesystem of `spacePath` (512 MiB; not checked
   * without a path), and how long an upload no task uses is kept (24 hours).
   */
  uploadLimits?: Partial<UploadLimits>;
  /**
   * Where the agent logs: what handlers write to `task.logger`, and a line
   * per call. Default {@link createLogger}: JSON lines (pino) on stderr at
   * `info`, or the level in `SYNAPSE_LOG_LEVEL`; `createLogger({ level:
   * "silent" })` logs nothing.
   */
  logger?: Logger;
}

/**
 * A Node request handler, for `http.createServer`, `https.createServer`,
 * `http2.createServer` or `http2.createSecureServer`, and the type of
 * connect-node's handlers (`connectNodeAdapter` returns one, and takes one
 * as its `fallback`), so the two mix either way.
 */
export type NodeRequestHandler = NonNullable<ConnectNodeAdapterOptions["fallback"]>;

/** Options of {@link SynapseAgent.requestHandler} and {@link SynapseAgent.httpHandler}. */
export interface RequestHandlerOptions {
  /** Answers requests for paths that are none of the agent's (your own routes); default a bare 404. */
  fallback?: NodeRequestHandler;
}

/**
 * An agent made by {@link createAgent}: start it, mount it on a server, and
 * close it when the server stops. ({@link serveAgent} does all of this.)
 */
export interface SynapseAgent {
  /** The agent's id (`sender.agent_id` of everything it signs). */
  readonly agentId: string;
  /** The agent's identity: its id, names and key. */
  readonly identity: AgentIdentity;
  /** The capabilities it declares (GetCapabilities). */
  readonly capabilities: AgentCapabilities;
  /** The store it keeps its state in. */
  readonly store: Store;
  /**
   * The events executors push back for tasks this agent requested from
   * them (callbacks): pass it with this agent's identity and URL to
   * `SynapseClient.connect({ callback: { url, inbox } })`, then read them
   * with {@link CallbackInbox.events}.
   */
  readonly inbox: CallbackInbox;
  /**
   * Takes over work a restart interrupted and starts the agent's
   * background duties (callback delivery, retention). Call it before the
   * server that mounts the agent accepts connections.
   */
  start(): Promise<void>;
  /**
   * Registers the agent's services (`synapse.v1.CapabilitiesService` and
   * `synapse.v1.P2PService`) on a Connect router, for example in
   * `connectNodeAdapter({ routes })` or a framework plugin of connect-es.
   * Uploads and the SSE event stream are plain HTTP, not RPCs: serve them
   * with {@link SynapseAgent.httpHandler}, the adapter's `fallback`.
   *
   * @example
   * ```ts
   * import { connectNodeAdapter } from "@connectrpc/connect-node";
   * http2.createServer(
   *   connectNodeAdapter({
   *     routes: (router) => { agent.routes(router); router.service(MyService, mine); },
   *     fallback: agent.httpHandler(),
   *   }),
   * );
   * ```
   */
  readonly routes: (router: ConnectRouter) => void;
  /**
   * A request handler serving the agent's services (with gRPC health and
   * reflection) in every protocol, and its plain HTTP paths (see
   * {@link SynapseAgent.httpHandler}), for a `node:http` or `node:http2`
   * server of your own. gRPC needs HTTP/2; Connect and gRPC-web work over both.
   *
   * @example
   * ```ts
   * const server = http2.createServer(agent.requestHandler());
   * await agent.start();
   * server.listen(8080, "127.0.0.1");
   * agent.listeningOn("127.0.0.1");
   * ```
   */
  requestHandler(options?: RequestHandlerOptions): NodeRequestHandler;
  /**
   * The agent's plain HTTP paths beside its RPCs: `POST /upload` (files a
   * task names), `GET /tasks/{task_id}/events` (a task's signed events as
   * Server-Sent Events) and the operator console under `/console`. Already
   * part of {@link SynapseAgent.requestHandler}; use it on its own with
   * {@link SynapseAgent.routes}.
   */
  httpHandler(options?: RequestHandlerOptions): NodeRequestHandler;
  /**
   * Tells the agent an address its server listens on (as {@link serveAgent}
   * does). Callbacks may go to loopback only while every such address is a
   * loopback address.
   */
  listeningOn(address: string): void;
  /**
   * Stops taking work, ends running handlers (resumable ones resume at the
   * next start), ends open Watch streams, and closes the store if the agent
   * opened it.
   */
  close(): Promise<void>;
}

/** What serveAgent needs of an agent beyond its public face. */
interface Internals {
  agent: Agent;
  storage: Storage;
  closeStore: () => Promise<void>;
}
const internals = new WeakMap<SynapseAgent, Internals>();

/** The internal agent behind a SynapseAgent, its storage, and how to close the store it opened (for serveAgent). */
export function internalsOf(agent: SynapseAgent): Internals {
  const parts = internals.get(agent);
  if (parts === undefined) throw new TypeError("not an agent from createAgent()");
  return parts;
}

/**
 * Creates an agent that runs the given handlers, without serving it: mount
 * it on a server of your own with {@link SynapseAgent.requestHandler} or
 * {@link SynapseAgent.routes}, call {@link SynapseAgent.start}, and
 * {@link SynapseAgent.close} it when the server stops. To serve it on a
 * port of its own, use {@link serveAgent}.
 */
export function createAgent(options: AgentOptions): Promise<SynapseAgent> {
  return buildAgent(options, false);
}

/** A name for an agent that names none: its task types. */
function typesName(types: readonly string[]): string {
  return `${types.join(", ")} agent`;
}

/** A name for an agent that names none: its data dir's (leading dots dropped), unless that is the default's, else its task types. */
function defaultAgentName(dataDir: string, types: readonly string[]): string {
  const name = basename(resolve(dataDir)).replace(/^\.+/, "");
  return name === "" || name === DEFAULT_DATA_DIR.replace(/^\.+/, "") ? typesName(types) : name;
}

/** createAgent, and for serveAgent also an agent that hosts groups (it declares them, so it must serve them). */
export async function buildAgent(options: AgentOptions, groups: boolean): Promise<SynapseAgent> {
  const types = Object.keys(options.handlers);
  if (types.length === 0) throw new TypeError("an agent needs at least one handler");
  const dataDir = options.dataDir ?? DEFAULT_DATA_DIR;
  const logger = options.logger ?? createLogger();
  const ownStore = options.store === undefined || typeof options.store === "string";
  const store = typeof options.store === "object" ? options.store : await openStore(options.store ?? "sqlite", { dataDir, logger });
  const storage = storageOf(store);
  if (storage === undefined) throw new TypeError("store must be a store name or a Store from openStore()");
  try {
    const identity =
      options.identity ??
      (options.store === "memory" && options.dataDir === undefined
        ? createIdentity({ agentName: options.agentName ?? typesName(types) })
        : (await loadOrCreateIdentity(dataDir, { agentName: options.agentName, defaultAgentName: defaultAgentName(dataDir, types) })).identity);
    const declared = options.capabilities ?? {};
    const explicit = new Map((declared.supportedTaskTypes ?? []).map((init) => create(SupportedTaskTypeSchema, init)).map((taskType) => [taskType.type, taskType]));
    const capabilities = defaultAgentCapabilities({
      agentName: identity.agentName,
      ...declared,
      supportedTaskTypes: types.map((type) => explicit.get(type) ?? declarationOf(type, options.handlers[type]!)),
    });
    const outbound = new OutboundPolicy({ allow: options.allowOutbound ?? [] });
    const config = {
      ...(options.taskTimeoutMs === undefined ? {} : { taskTimeoutMs: options.taskTimeoutMs }),
      ...(options.heartbeatIntervalMs === undefined ? {} : { heartbeatIntervalMs: options.heartbeatIntervalMs }),
    };
    const agent = assembleAgent({
      identity,
      capabilities,
      handlers: new Map(types.map((type) => [type, handlerOf(options.handlers[type]!)])),
      trust: options.trust ?? new PinnedKeys(storage.pins),
      store: storage.tasks,
      uploads: storage.uploads,
      uploadLimits: options.uploadLimits,
      groups,
      config,
      clockSkewMs: options.clockSkewMs,
      retentionMs: options.retentionMs,
      leaseMs: options.leaseMs,
      outbound,
      logger,
    });
    return wrap({ agent, storage, closeStore: ownStore ? () => store.close() : async () => undefined }, store, logger);
  } catch (error) {
    if (ownStore) await store.close();
    throw error;
  }
}

function wrap(parts: Internals, store: Store, logger: Logger): SynapseAgent {
  const { agent, closeStore } = parts;
  const capabilities = agent.provider.getCapabilities();
  const maxBytes = Number(capabilities.maxFileSize) + MESSAGE_OVERHEAD_BYTES;
  // Aborted when the agent closes: open Watch streams end, health reports NOT_SERVING.
  const closing = new AbortController();
  setMaxListeners(0, closing.signal);
  const interceptors = [shapeErrors(logger)];
  const routes = (router: ConnectRouter) => {
    router.service(CapabilitiesService, capabilitiesService(agent.provider), { interceptors });
    router.service(P2PService, p2pService(agent, closing.signal, maxBytes), { interceptors, readMaxBytes: maxBytes, writeMaxBytes: maxBytes });
  };
  const health = new ServerHealth();
  let closed: Promise<void> | undefined;
  const synapseAgent: SynapseAgent = {
    agentId: agent.identity.agentId,
    identity: agent.identity,
    capabilities,
    store,
    inbox: agent.inbox,
    start: () => agent.start(),
    routes,
    // Node hands every handler a real response; connect-node's type only patches write() and writeHead() to agree.
    httpHandler: (options = {}) => withRequestLog(httpRoutes({ agent, draining: closing.signal, logger, fallback: options.fallback }), { logger }) as NodeRequestHandler,
    requestHandler(options = {}) {
      const handler = createRequestHandler({
        routes: (router) => {
          router.service(CapabilitiesService, capabilitiesService(agent.provider));
          router.service(P2PService, p2pService(agent, closing.signal, maxBytes));
          registerReflection(router);
          health.register(router, closing.signal);
        },
        logger,
        readMaxBytes: maxBytes,
        writeMaxBytes: maxBytes,
        interceptors,
        fallback: httpRoutes({ agent, draining: closing.signal, logger, fallback: options.fallback }),
      });
      return withRequestLog(handler, { logger }) as NodeRequestHandler;
    },
    listeningOn: (address) => agent.outbound.noteListening(address),
    close() {
      closed ??= (async () => {
        health.shutdown();
        try {
          await agent.stop();
          closing.abort();
        } finally {
          await closeStore();
        }
      })();
      return closed;
    },
  };
  internals.set(synapseAgent, parts);
  return synapseAgent;
}

