// The Synapse server: every service on one port, for gRPC, gRPC-web and
// Connect, with read/write limits from max_file_size, a request log,
// metrics at /metrics, and a graceful shutdown that lets in-flight calls
// finish.
import { Code, ConnectError, type ConnectRouter } from "@connectrpc/connect";
import { setMaxListeners } from "node:events";
import { CapabilitiesService, type AgentCapabilities } from "../../gen/synapse/v1/capabilities_pb.js";
import { P2PService } from "../../gen/synapse/v1/p2p_pb.js";
import type { Agent } from "../agent/agent.js";
import { RegistryService } from "../../gen/synapse/v1/registry_pb.js";
import { GroupService } from "../../gen/synapse/v1/group_pb.js";
import type { GroupHost } from "../group/group-host.js";
import type { Registry } from "../registry/registry.js";
import type { Wiring } from "../capabilities/interfaces.js";
import { CapabilitiesProvider } from "../capabilities/provider.js";
import { silentLogger, type Logger } from "../log.js";
import { capabilitiesService } from "./capabilities-service.js";
import { groupService } from "./group-service.js";
import { p2pService } from "./p2p-service.js";
import { registryService } from "./registry-service.js";
import { createRequestHandler } from "./adapter.js";
import { shapeErrors } from "./error-shape.js";
import { httpRoutes } from "./http-routes.js";
import { ServerHealth } from "./health.js";
import type { ConnectionLimitOptions } from "./connection-limits.js";
import { createListener, type Listener, type TlsFiles } from "./listener.js";
import { registerReflection } from "./reflection.js";
import { withRequestLog } from "./request-log.js";
import { metricsRoute } from "./metrics-route.js";
import { A2AService } from "../../gen/lf/a2a/v1/a2a_pb.js";
import type { A2AServiceImpl } from "../a2a/http-call.js";
import { createA2AFace, type A2AFace, type A2AServerOptions } from "../a2a/serve.js";
import { a2aVersionInterceptor } from "../a2a/version.js";
import { ServerMetrics } from "../observability/metrics.js";

/** Room for the envelope, header and framing around a max_file_size payload. */
export const MESSAGE_OVERHEAD_BYTES = 64 * 1024;

/** Connection limits (connection-limits.ts): a cap and header, body, idle and write timeouts; each has a default. */
export interface ServerOptions extends ConnectionLimitOptions {
  /** Capabilities to declare when no agent is given (CapabilitiesService only). */
  capabilities?: AgentCapabilities;
  /** The agent whose services (CapabilitiesService and P2PService) are served. */
  agent?: Agent;
  /** A registry to host beside the agent (RegistryService); needs an agent. */
  registry?: Registry;
  /** Groups the agent hosts (GroupService); the agent must be created with `groups: true`, and only then. */
  groups?: GroupHost;
  host?: string;
  port?: number;
  tls?: TlsFiles;
  logger?: Logger;
  /** How long shutdown waits for in-flight calls before cutting them off. */
  shutdownGraceMs?: number;
  /** Serve GET /metrics (Prometheus text) and count for it; default true. */
  metrics?: boolean;
  /** How often an idle SSE event stream gets a comment line (default 15 s). */
  sseHeartbeatMs?: number;
  /**
   * Serve A2A v1.0 beside Synapse (lf.a2a.v1.A2AService over gRPC, Connect
   * and gRPC-web, JSON-RPC at POST /a2a/jsonrpc, REST under /a2a/rest, and
   * the agent card); needs an agent.
   */
  a2a?: A2AServerOptions;
  /**
   * Instead of `a2a`: any A2AService implementation to serve on the same
   * bindings (no card), made with the server's drain signal, on which its
   * streams end.
   */
  a2aService?: (server: { draining: AbortSignal }) => A2AServiceImpl;
}

export interface RunningServer {
  readonly url: string;
  readonly port: number;
  readonly host: string;
  readonly capabilities: CapabilitiesProvider;
  /** Aborted when shutdown begins: long-lived streams end on it. */
  readonly draining: AbortSignal;
  /** The server's metrics (served at /metrics), unless started with metrics: false. */
  readonly metrics?: ServerMetrics;
  /** The A2A face (service and card), when A2A is served. */
  readonly a2a?: A2AFace;
  /** Stops accepting, lets in-flight calls finish (within the grace period), then closes everything. */
  close(): Promise<void>;
}

const CAPABILITIES_ONLY: Wiring = { capabilities: true, p2p: false, taskStatus: false, streaming: false, humanInTheLoop: false, callbacks: false, groups: false };

function requireCapabilities(options: ServerOptions): AgentCapabilities {
  if (options.capabilities === undefined) throw new TypeError("startServer needs an agent or capabilities");
  return options.capabilities;
}

export async function startServer(options: ServerOptions): Promise<RunningServer> {
  const logger = options.logger ?? silentLogger;
  const agent = options.agent;
  const provider = agent?.provider ?? new CapabilitiesProvider(requireCapabilities(options), CAPABILITIES_ONLY);
  const capabilities = provider.getCapabilities();
  // What GetSupportedInterfaces claims is what is served: group interfaces go with GroupService.
  if (capabilities.supportGroups !== (options.groups !== undefined) || (options.groups !== undefined && agent === undefined)) {
    throw new TypeError("an agent created with `groups: true` is served with a group host (startServer({ groups })), and only such an agent");
  }
  const maxBytes = Number(capabilities.maxFileSize) + MESSAGE_OVERHEAD_BYTES;
  const drainController = new AbortController();
  const shutdownController = new AbortController();
  // Every open call listens on these; many calls are normal, not a leak.
  setMaxListeners(0, drainController.signal, shutdownController.signal);
  const health = new ServerHealth();
  const metrics = options.metrics === false ? undefined : new ServerMetrics(agent?.store);
  const detachMetrics = metrics && agent ? agent.observers.add(metrics.agentObserver) : undefined;

  const a2a = agent && options.a2a ? createA2AFace(agent, drainController.signal, { logger, ...options.a2a }) : undefined;
  const a2aService = a2a?.service ?? options.a2aService?.({ draining: drainController.signal });
  const routes = (router: ConnectRouter) => {
    router.service(CapabilitiesService, capabilitiesService(provider));
    // Without an agent P2PService is still declared, and answers UNIMPLEMENTED.
    router.service(P2PService, agent ? p2pService(agent, drainController.signal, maxBytes) : {});
    if (a2aService !== undefined) router.service(A2AService, a2aService);
    if (options.groups && agent) router.service(GroupService, groupService(options.groups, agent, drainController.signal, maxBytes));
    if (options.registry && agent) {
      router.service(
        RegistryService,
        registryService(options.registry, {
          agentId: agent.identity.agentId,
          keyId: agent.identity.key.keyId,
          trust: agent.trust,
          clockSkewMs: agent.clockSkewMs,
          onMessage: (type) => agent.observers.messageReceived(type),
          replyLimit: maxBytes,
        }),
      );
    }
    // Reflection describes every service on the router; health, registered last, knows them all.
    registerReflection(router);
    health.register(router, drainController.signal);
  };
  const plainRoutes = httpRoutes({
    agent,
    a2a,
    draining: drainController.signal,
    logger,
    sseHeartbeatMs: options.sseHeartbeatMs,
    a2aBindings: a2aService === undefined ? undefined : { service: a2aService, maxBodyBytes: maxBytes },
  });
  const handler = createRequestHandler({
    routes,
    logger,
    readMaxBytes: maxBytes,
    writeMaxBytes: maxBytes,
    // A2A calls naming a version we do not speak are refused before the service (version.ts); other services pass.
    interceptors: a2aService === undefined ? [shapeErrors(logger)] : [shapeErrors(logger), a2aVersionInterceptor],
    shutdownSignal: shutdownController.signal,
    fallback: metrics ? metricsRoute(metrics, plainRoutes, logger) : plainRoutes,
  });
  const listener: Listener = createListener({
    handler: withRequestLog(handler, { logger, metrics }),
    tls: options.tls,
    logger,
    maxConnections: options.maxConnections,
    headerTimeoutMs: options.headerTimeoutMs,
    bodyTimeoutMs: options.bodyTimeoutMs,
    idleTimeoutMs: options.idleTimeoutMs,
    writeTimeoutMs: options.writeTimeoutMs,
  });
  // Callbacks and registry confirmations may go to loopback only while the server itself is reachable on loopback only.
  const noteListening = (address: string) => {
    agent?.outbound.noteListening(address);
    options.registry?.outbound.noteListening(address);
  };
  noteListening(options.host ?? "127.0.0.1");
  // Interrupted work is taken over before the first new message is taken.
  await agent?.start();
  const { port, host } = await listener.listen(options.port ?? 0, options.host ?? "127.0.0.1").catch(async (error: unknown) => {
    detachMetrics?.();
    await agent?.stop();
    throw error;
  });
  noteListening(host);
  // Group tasks resume once the agent listens: a member may be the host itself.
  await options.groups?.start();
  const scheme = options.tls ? "https" : "http";
  const urlHost = host.includes(":") ? `[${host}]` : host;
  const url = `${scheme}://${urlHost}:${port}`;
  a2a?.listening(url);
  const limits = listener.limits;
  logger.info(
    {
      url,
      agent_id: capabilities.agentId,
      key_id: capabilities.keyId,
      max_connections: limits.maxConnections,
      header_timeout_ms: limits.headerTimeoutMs,
      body_timeout_ms: limits.bodyTimeoutMs,
      idle_timeout_ms: limits.idleTimeoutMs,
      write_timeout_ms: limits.writeTimeoutMs,
    },
    "listening",
  );

  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      // Health checkers learn first, so load balancers stop sending new calls.
      health.shutdown();
      logger.info({ in_flight: listener.inFlight(), connections: listener.connections() }, "shutting down");
      listener.stopAccepting();
      // Group tasks stop following their members (a restart picks them up), then running tasks end
      // (their last events reach watchers), then open streams are told to resume elsewhere.
      await options.groups?.stop();
      await a2a?.close();
      await agent?.stop();
      drainController.abort();
      const grace = options.shutdownGraceMs ?? 10_000;
      let timer: NodeJS.Timeout | undefined;
      const expired = await Promise.race([
        listener.idle().then(() => false),
        new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), grace))),
      ]);
      clearTimeout(timer);
      if (expired) {
        logger.warn({ in_flight: listener.inFlight() }, "grace period over, cancelling remaining calls");
        shutdownController.abort(new ConnectError("server is shutting down", Code.Unavailable));
        await Promise.race([listener.idle(), new Promise((resolve) => setTimeout(resolve, 1000))]);
      }
      await options.registry?.close();
      detachMetrics?.();
      // Let the last frames (trailers, GOAWAY) leave before the sockets go.
      await new Promise((resolve) => setImmediate(resolve));
      listener.destroyAll();
      logger.info("stopped");
    })();
    return closing;
  };
  return { url, port, host, capabilities: provider, draining: drainController.signal, metrics, a2a, close };
}
