// An agent built on the official A2A SDK (@a2a-js/sdk), on real sockets:
// its express app serving JSON-RPC (/a2a/jsonrpc), HTTP+JSON (/a2a/rest) and
// the card (/.well-known/agent-card.json, optionally signed with an Ed25519
// key published as a JWKS at /.well-known/jwks.json), and its gRPC server on
// a second port (behind a TCP relay, so that a test can drop its
// connections too). Each request's A2A-Version and Authorization headers are
// recorded. Three executors: one that completes, one that asks for
// input first, one that streams artifacts slowly (and can be cancelled).
import * as grpc from "@grpc/grpc-js";
import { generateAgentCardSignature, TaskState, Role, type AgentCard } from "@a2a-js/sdk";
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore, type AgentExecutor, type ExecutionEventBus, type RequestContext } from "@a2a-js/sdk/server";
import { agentCardHandler, jsonRpcHandler, restHandler, UserBuilder } from "@a2a-js/sdk/server/express";
import { A2AService, grpcService } from "@a2a-js/sdk/server/grpc";
import express from "express";
import { exportJWK, generateKeyPair, type JWK } from "jose";
import { createConnection, createServer, type AddressInfo, type Socket } from "node:net";
import type { Server } from "node:http";

type Bus = ExecutionEventBus;
type SdkPart = RequestContext["userMessage"]["parts"][number];

const now = () => new Date().toISOString();

function agentMessage(ctx: { taskId: string; contextId: string }, text: string) {
  return { messageId: `m-${Math.random().toString(36).slice(2)}`, contextId: ctx.contextId, taskId: ctx.taskId, role: Role.ROLE_AGENT, parts: [textPart(text)], metadata: undefined, extensions: [], referenceTaskIds: [] };
}

function textPart(text: string): SdkPart {
  return { content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "text/plain" };
}

function dataPart(value: unknown): SdkPart {
  return { content: { $case: "data", value }, metadata: undefined, filename: "", mediaType: "application/json" };
}

/** The JSON data of a message's first data part, or its text joined. */
function inputOf(ctx: RequestContext): unknown {
  const parts = ctx.userMessage.parts;
  const data = parts.find((part) => part.content?.$case === "data");
  if (data?.content?.$case === "data") return data.content.value;
  return parts.map((part) => (part.content?.$case === "text" ? part.content.value : "")).join("");
}

function publishTask(ctx: RequestContext, bus: Bus): void {
  if (ctx.task) {
    bus.publish(AgentEvent.task(ctx.task));
    return;
  }
  bus.publish(
    AgentEvent.task({ id: ctx.taskId, contextId: ctx.contextId, status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: now() }, artifacts: [], history: [ctx.userMessage], metadata: undefined }),
  );
}

function status(ctx: { taskId: string; contextId: string }, bus: Bus, state: TaskState, text?: string, extra?: SdkPart): void {
  const message = text === undefined ? undefined : agentMessage(ctx, text);
  if (message && extra) message.parts.push(extra);
  bus.publish(AgentEvent.statusUpdate({ taskId: ctx.taskId, contextId: ctx.contextId, status: { state, message, timestamp: now() }, metadata: undefined }));
}

function artifact(ctx: { taskId: string; contextId: string }, bus: Bus, id: string, part: SdkPart, append = false): void {
  bus.publish(
    AgentEvent.artifactUpdate({ taskId: ctx.taskId, contextId: ctx.contextId, artifact: { artifactId: id, name: id, description: "", parts: [part], metadata: undefined, extensions: [] }, append, lastChunk: true, metadata: undefined }),
  );
}

async function cancelTask(taskId: string, bus: Bus): Promise<void> {
  bus.publish(AgentEvent.statusUpdate({ taskId, contextId: "", status: { state: TaskState.TASK_STATE_CANCELED, message: undefined, timestamp: now() }, metadata: undefined }));
}

/** Completes at once: an artifact `result` holding {echo: input}. */
export const completingExecutor: AgentExecutor = {
  async execute(ctx, bus) {
    publishTask(ctx, bus);
    status(ctx, bus, TaskState.TASK_STATE_WORKING, "working");
    artifact(ctx, bus, "result", dataPart({ echo: inputOf(ctx) }));
    status(ctx, bus, TaskState.TASK_STATE_COMPLETED, "done");
  },
  cancelTask,
};

/** Asks for a city first (input-required, naming the field in a data part); completes with the answer. */
export const askingExecutor: AgentExecutor = {
  async execute(ctx, bus) {
    publishTask(ctx, bus);
    if (!ctx.task) {
      status(ctx, bus, TaskState.TASK_STATE_INPUT_REQUIRED, "which city?", dataPart({ missingFields: [{ field: "city", reason: "the forecast needs a city" }] }));
      return;
    }
    const answer = inputOf(ctx);
    artifact(ctx, bus, "forecast", dataPart({ answer, forecast: "sunny" }));
    status(ctx, bus, TaskState.TASK_STATE_COMPLETED, "forecast ready");
  },
  cancelTask,
};

/** Asks for a human decision first (input-required with a need_human data part); completes when approved, fails when rejected. */
export const decidingExecutor: AgentExecutor = {
  async execute(ctx, bus) {
    publishTask(ctx, bus);
    if (!ctx.task) {
      const ask = { kind: "need_human", decisionId: "payment-1", options: [{ field: "amount", value: 100, prosCons: "within budget" }] };
      status(ctx, bus, TaskState.TASK_STATE_INPUT_REQUIRED, "approve the payment?", dataPart(ask));
      return;
    }
    const answer = inputOf(ctx) as { decision?: string; fields?: unknown; reason?: string };
    if (answer?.decision === "reject") {
      status(ctx, bus, TaskState.TASK_STATE_FAILED, `rejected: ${answer.reason ?? ""}`);
      return;
    }
    artifact(ctx, bus, "payment", dataPart({ decision: answer?.decision, fields: answer?.fields }));
    status(ctx, bus, TaskState.TASK_STATE_COMPLETED, "paid");
  },
  cancelTask,
};

/** Streams `count` text artifact chunks (default 3) `delayMs` apart (default 150), then completes; stops when cancelled. */
export function streamingExecutor(): AgentExecutor {
  const cancelled = new Set<string>();
  return {
    async execute(ctx, bus) {
      publishTask(ctx, bus);
      status(ctx, bus, TaskState.TASK_STATE_WORKING, "streaming");
      const input = inputOf(ctx) as { count?: number; delayMs?: number };
      const count = typeof input === "object" && input !== null && typeof input.count === "number" ? input.count : 3;
      const delayMs = typeof input === "object" && input !== null && typeof input.delayMs === "number" ? input.delayMs : 150;
      for (let i = 1; i <= count; i++) {
        await new Promise((resolve) => setTimeout(resolve, delayMs));
        if (cancelled.has(ctx.taskId)) return;
        artifact(ctx, bus, `chunk-${i}`, textPart(`chunk ${i} of ${count}`));
      }
      status(ctx, bus, TaskState.TASK_STATE_COMPLETED, `streamed ${count} chunks`);
    },
    async cancelTask(taskId, bus) {
      cancelled.add(taskId);
      await cancelTask(taskId, bus);
    },
  };
}

export interface SdkAgent {
  /** The express app's base URL (card, JSON-RPC, REST). */
  url: string;
  cardUrl: string;
  grpcAddress: string;
  /** The card's public signing key (when signed), as the JWKS serves it. */
  publicJwk?: JWK;
  /** The A2A-Version and Authorization headers of each request, by binding. */
  requests: Array<{ binding: "express" | "grpc"; version: string | undefined; authorization: string | undefined }>;
  /** Drops every open connection (HTTP and gRPC: a dropped stream), leaving the servers up. */
  dropConnections(): void;
  close(): Promise<void>;
}

export interface SdkAgentOptions {
  name?: string;
  /** Sign the card with an Ed25519 key (kid "card-key", jku on the card's origin). */
  signed?: boolean;
  /** Change the card after signing it (its description), so its signature no longer holds. */
  tamper?: boolean;
  /** The order the card lists its interfaces in; default JSON-RPC, HTTP+JSON, gRPC. */
  order?: Array<"JSONRPC" | "HTTP+JSON" | "GRPC">;
}

/** Starts an SDK agent on 127.0.0.1 with the executor. */
export async function startSdkAgent(executor: AgentExecutor, options: SdkAgentOptions = {}): Promise<SdkAgent> {
  const app = express();
  const sockets = new Set<Socket>();
  const http: Server = await new Promise((resolve) => {
    const server = app.listen(0, "127.0.0.1", () => resolve(server));
  });
  http.on("connection", (socket: Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  const grpcServer = new grpc.Server();
  const grpcPort: number = await new Promise((resolve, reject) =>
    grpcServer.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (error, port) => (error ? reject(error) : resolve(port))),
  );
  // The relay the card names for gRPC: its connections can be cut like the HTTP ones.
  const relay = createServer((inbound) => {
    const outbound = createConnection({ host: "127.0.0.1", port: grpcPort });
    sockets.add(inbound);
    inbound.on("close", () => sockets.delete(inbound));
    inbound.pipe(outbound).pipe(inbound);
    const end = () => {
      inbound.destroy();
      outbound.destroy();
    };
    inbound.on("error", end).on("close", end);
    outbound.on("error", end).on("close", end);
  });
  await new Promise<void>((resolve) => relay.listen(0, "127.0.0.1", resolve));
  const grpcAddress = `127.0.0.1:${(relay.address() as AddressInfo).port}`;
  const urls = { JSONRPC: `${url}/a2a/jsonrpc`, "HTTP+JSON": `${url}/a2a/rest`, GRPC: grpcAddress };
  const order = options.order ?? ["JSONRPC", "HTTP+JSON", "GRPC"];
  const baseCard: AgentCard = {
    name: options.name ?? "sdk test agent",
    description: "An agent on @a2a-js/sdk for the client tests",
    supportedInterfaces: order.map((binding) => ({ url: urls[binding], protocolBinding: binding, tenant: "", protocolVersion: "1.0" })),
    provider: { organization: "tests", url: "https://example.invalid" },
    version: "1.0.0",
    capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ["text/plain", "application/json"],
    defaultOutputModes: ["text/plain", "application/json"],
    skills: [{ id: "echo", name: "echo", description: "answers", tags: ["test"], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
    signatures: [],
  } as unknown as AgentCard;
  let card = baseCard;
  let publicJwk: JWK | undefined;
  if (options.signed) {
    const { privateKey, publicKey } = await generateKeyPair("EdDSA", { crv: "Ed25519" });
    publicJwk = { ...(await exportJWK(publicKey)), kid: "card-key", alg: "EdDSA" };
    card = await generateAgentCardSignature(privateKey, { alg: "EdDSA", typ: "JOSE", kid: "card-key", jku: `${url}/.well-known/jwks.json` })(baseCard);
    if (options.tamper) card = { ...card, description: "a description changed after signing" };
  }
  const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor);
  const requests: SdkAgent["requests"] = [];
  const header = (value: unknown) => (Array.isArray(value) ? String(value[0]) : typeof value === "string" ? value : undefined);
  const expressUsers = async (req: express.Request) => {
    requests.push({ binding: "express", version: header(req.headers["a2a-version"]), authorization: header(req.headers.authorization) });
    return UserBuilder.noAuthentication();
  };
  const grpcUsers = async (call: { metadata: grpc.Metadata }) => {
    requests.push({ binding: "grpc", version: header(call.metadata.get("a2a-version")[0]), authorization: header(call.metadata.get("authorization")[0]) });
    return UserBuilder.noAuthentication();
  };
  app.get("/.well-known/jwks.json", (_req, res) => {
    res.json({ keys: publicJwk ? [publicJwk] : [] });
  });
  app.use("/.well-known/agent-card.json", agentCardHandler({ agentCardProvider: async () => card }));
  app.use("/a2a/jsonrpc", jsonRpcHandler({ requestHandler: handler, userBuilder: expressUsers }));
  app.use("/a2a/rest", restHandler({ requestHandler: handler, userBuilder: expressUsers }));
  grpcServer.addService(A2AService, grpcService({ requestHandler: handler, userBuilder: grpcUsers as never }));
  return {
    url,
    cardUrl: `${url}/.well-known/agent-card.json`,
    grpcAddress,
    publicJwk,
    requests,
    dropConnections() {
      for (const socket of sockets) socket.destroy();
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => http.close(() => resolve()));
      await new Promise<void>((resolve) => relay.close(() => resolve()));
      grpcServer.forceShutdown();
    },
  };
}
