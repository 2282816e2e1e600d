/**
 * The executor side: an agent that runs tasks of the types you give it
 * handlers for, keeps their state in a store, and serves them over gRPC,
 * gRPC-web and Connect.
 *
 * - {@link serveAgent}: an agent on a port of its own, in a few lines.
 * - {@link createAgent}: the same agent, to mount on a server you already
 *   have: {@link SynapseAgent.requestHandler} for `node:http` / `node:http2`,
 *   {@link SynapseAgent.routes} for a Connect router.
 * - Handlers ({@link TaskFunction}, {@link TaskHandler}) get a
 *   {@link TaskContext}: the task's payload, progress reports, questions for
 *   the requester ({@link TaskContext.askForInfo}) or a human
 *   ({@link TaskContext.askHuman}), and a cancellation signal.
 * - Stores ({@link openStore}): SQLite in a data directory (the default),
 *   PostgreSQL shared by several instances, or memory for tests.
 *
 * @example
 * ```ts
 * import { serveAgent } from "synapse-connect/server";
 *
 * const server = await serveAgent({
 *   handlers: {
 *     shout: async (task) => ({ output: { text: String(task.payload.text).toUpperCase() } }),
 *   },
 *   dataDir: "./.my-agent", // its key and its SQLite store
 *   port: 8080,
 * });
 * console.log(`${server.agent.agentId} listening on ${server.url}`);
 * ```
 *
 * @packageDocumentation
 * @module synapse-connect/server
 */
import { createGroupHost } from "../group/group-host.js";
import { createLogger } from "../log.js";
import { startServer } from "../server/server.js";
import { buildAgent, internalsOf, type AgentOptions, type SynapseAgent } from "./agent.js";

export type {
  TaskHandler,
  TaskContext,
  TaskInput,
  TaskOutput,
  Validation,
  MissingFieldSpec,
  HumanQuestion,
  HumanAnswer,
  ResultStreamSource,
  ResultArtifact,
  ResultPart,
  UploadedFile,
  TaskUploads,
  TaskTrace,
} from "../agent/handler.js";
export type { UploadLimits } from "../agent/uploads.js";
export type { FilesystemSpace, Statfs, UploadRoomLimits } from "../agent/upload-room.js";
export { TaskFailure, RESULT_ARTIFACTS_KEY, RESULT_DIRECT_REPLY_KEY } from "../agent/handler.js";
export type { CallbackInbox, InboxEvent, ExpectedExecutor } from "../agent/inbox.js";
export type { StoredEvent } from "../store/store.js";
export { StoreOpenError } from "../store/errors.js";
export { createLogger, type Logger, type LoggerOptions } from "../log.js";
export { createAgent, type AgentOptions, type SynapseAgent, type NodeRequestHandler, type RequestHandlerOptions } from "./agent.js";
export type { TaskFunction, TaskTypeHandler, HandlerDefinition } from "./handlers.js";
export { openStore, DEFAULT_DATA_DIR, type Store, type StoreSpec, type OpenStoreOptions } from "./store.js";

import type { A2ABinding } from "../a2a/card.js";
export type { A2ABinding };

/** How {@link serveAgent} serves A2A v1.0 beside Synapse (docs/A2A.md). */
export interface A2AOptions {
  /** Admit callers without credentials, all as one anonymous requester (for local use). */
  open?: boolean;
  /** The task type of messages that name none, when the agent has several. */
  defaultSkill?: string;
  /** The bindings the card lists, preferred first (default all three: JSON-RPC, HTTP+JSON, gRPC). */
  bindings?: readonly A2ABinding[];
  /** The base URL clients reach the server at (default the URL it listens on). */
  publicUrl?: string;
  /** The agent's version in the card (default the package's). */
  version?: string;
}

/** Options of {@link serveAgent}: the agent's ({@link AgentOptions}) and where and how to listen. */
export interface ServeAgentOptions extends AgentOptions {
  /** The address to listen on; default `127.0.0.1`. */
  host?: string;
  /** The port; default 0, any free port (read it from {@link ServedAgent.port}). */
  port?: number;
  /**
   * Also host groups of agents (`synapse.v1.GroupService`, docs/PROTOCOL.md
   * §7): members, group tasks run as P2P tasks at the members, and votes,
   * kept in the agent's store. The agent then declares the group
   * interfaces. Members and coordinators use `GroupClient` from
   * `synapse-connect/client`. Default false.
   */
  groups?: boolean;
  /** A certificate and key (PEM) to serve HTTPS on (h2 and HTTP/1.1, chosen by ALPN). */
  tls?: {
    /** The certificate chain, PEM. */
    cert: string | Buffer;
    /** Its private key, PEM. */
    key: string | Buffer;
  };
  /** Open connections at most (0: no cap); default 3/4 of the open-file limit, at most 10,000. */
  maxConnections?: number;
  /** How long a new connection may take to send its first request's headers; default 20 s. */
  headerTimeoutMs?: number;
  /** How long a request body may take to arrive after its headers; default 60 s. */
  bodyTimeoutMs?: number;
  /** How long a connection with no call in flight stays open; default 60 s. */
  idleTimeoutMs?: number;
  /** How long a response may be unable to write (its client stopped reading) before it is cut; default 60 s. */
  writeTimeoutMs?: number;
  /** How long {@link ServedAgent.close} lets calls in flight finish before cutting them off; default 10 s. */
  shutdownGraceMs?: number;
  /**
   * Serve `GET /metrics` (Prometheus text: calls, messages, refusals,
   * transitions, tasks by state, streams, callbacks, store latency; see
   * docs/OBSERVABILITY.md) on the same port; default true.
   */
  metrics?: boolean;
  /**
   * Also serve A2A v1.0 (`lf.a2a.v1.A2AService` over gRPC on the same port,
   * and the signed agent card at `/.well-known/agent-card.json`; see
   * docs/A2A.md): `true`, or options (`open` admits callers without a
   * bearer token as one anonymous requester; `defaultSkill` is the task
   * type of messages that name none). Default off (`synapse serve` has it on).
   */
  a2a?: boolean | A2AOptions;
}

/** An agent listening on its own port (from {@link serveAgent}). */
export interface ServedAgent {
  /** The base URL requesters connect to, for example `http://127.0.0.1:8080`. */
  readonly url: string;
  /** The port it listens on. */
  readonly port: number;
  /** The address it listens on. */
  readonly host: string;
  /** The agent served. */
  readonly agent: SynapseAgent;
  /**
   * Shuts down gracefully: stops accepting, lets calls in flight finish
   * (within the grace period), stops the agent, then closes the store if
   * it was opened here.
   */
  close(): Promise<void>;
}

/**
 * Creates an agent (see {@link createAgent}) and serves it on one port, as
 * gRPC, gRPC-web and Connect (with gRPC health and reflection), until
 * {@link ServedAgent.close}. Signals are yours to handle: call `close()` on
 * SIGTERM for a graceful stop.
 *
 * @example
 * ```ts
 * import { serveAgent } from "synapse-connect/server";
 *
 * const server = await serveAgent({
 *   handlers: {
 *     echo: async (task) => {
 *       await task.progress(50, "echoing");
 *       return { output: task.payload };
 *     },
 *   },
 *   store: "memory",
 *   port: 8080,
 * });
 * process.once("SIGTERM", () => void server.close());
 * ```
 */
export async function serveAgent(options: ServeAgentOptions): Promise<ServedAgent> {
  // One logger for the agent and its server: the caller's, or stderr at info.
  const logger = options.logger ?? createLogger();
  const synapseAgent = await buildAgent({ ...options, logger }, options.groups === true);
  const { agent, storage, closeStore } = internalsOf(synapseAgent);
  let server: Awaited<ReturnType<typeof startServer>>;
  try {
    const groups = options.groups === true ? createGroupHost({ agent, storage: storage.groups, logger, retentionMs: options.retentionMs }) : undefined;
    server = await startServer({
      agent,
      groups,
      host: options.host,
      port: options.port,
      tls: options.tls,
      logger,
      maxConnections: options.maxConnections,
      headerTimeoutMs: options.headerTimeoutMs,
      bodyTimeoutMs: options.bodyTimeoutMs,
      idleTimeoutMs: options.idleTimeoutMs,
      writeTimeoutMs: options.writeTimeoutMs,
      shutdownGraceMs: options.shutdownGraceMs,
      metrics: options.metrics,
      a2a: options.a2a === true || (options.a2a !== undefined && options.a2a !== false) ? { pushStore: storage.a2aPush, ...(options.a2a === true ? {} : options.a2a) } : undefined,
    });
  } catch (error) {
    await synapseAgent.close();
    throw error;
  }
  let closed: Promise<void> | undefined;
  return {
    url: server.url,
    port: server.port,
    host: server.host,
    agent: synapseAgent,
    close() {
      closed ??= server.close().finally(closeStore);
      return closed;
    },
  };
}
