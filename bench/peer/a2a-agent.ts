// The A2A-js peer of `npm run bench -- peer`: an agent built with the
// official A2A JavaScript SDK (@a2a-js/sdk 1.3.0, protocol v1.0) that does
// the same text_analysis work as Synapse's reference handler (the same
// analyzeText: characters, words, sentences, top words), with the SDK's
// in-memory task store, served over gRPC (@a2a-js/sdk/server/grpc) and
// JSON-RPC over HTTP/1.1 (@a2a-js/sdk/server/express) from one process and
// one request handler, as the SDK's multi-transport sample does.
//
//   node dist/bench/peer/a2a-agent.js [--host 127.0.0.1] [--grpc-port 0] [--http-port 0]
//
// Prints "a2a-js peer listening grpc=http://HOST:PORT jsonrpc=http://HOST:PORT/"
// on stdout once both listen; stops on SIGTERM or SIGINT.
import { randomUUID } from "node:crypto";
import type { AddressInfo } from "node:net";
import { parseArgs } from "node:util";
import * as grpc from "@grpc/grpc-js";
import { Role, TaskState, type AgentCard, type Message } from "@a2a-js/sdk";
import {
  AgentEvent,
  DefaultRequestHandler,
  InMemoryTaskStore,
  type AgentExecutor,
  type ExecutionEventBus,
  type RequestContext,
} from "@a2a-js/sdk/server";
import { jsonRpcHandler, UserBuilder } from "@a2a-js/sdk/server/express";
import { A2AService, grpcService } from "@a2a-js/sdk/server/grpc";
import express from "express";
import { analyzeText } from "../../src/agent/reference/text-analysis.js";

const PROTOCOL_VERSION = "1.0";

/** The text of the user message: its text parts, joined. */
function textOf(message: Message): string {
  return message.parts.flatMap((part) => (part.content?.$case === "text" ? [part.content.value] : [])).join("\n");
}

const now = () => new Date().toISOString();

/**
 * What Synapse's text_analysis handler does, as an A2A executor: the task is
 * published (submitted), set working, its result published as an artifact
 * holding the analysis as data, then completed with a one-line summary.
 */
const textAnalysisExecutor: AgentExecutor = {
  async execute(context: RequestContext, bus: ExecutionEventBus): Promise<void> {
    const { taskId, contextId, userMessage } = context;
    bus.publish(
      AgentEvent.task({
        id: taskId,
        contextId,
        status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: now() },
        artifacts: [],
        history: [userMessage],
        metadata: undefined,
      }),
    );
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: { state: TaskState.TASK_STATE_WORKING, message: undefined, timestamp: now() }, metadata: undefined }));
    const output = analyzeText(textOf(userMessage));
    bus.publish(
      AgentEvent.artifactUpdate({
        taskId,
        contextId,
        artifact: {
          artifactId: randomUUID(),
          name: "text_analysis",
          description: "",
          parts: [{ content: { $case: "data", value: output }, metadata: undefined, filename: "", mediaType: "application/json" }],
          metadata: undefined,
          extensions: [],
        },
        append: false,
        lastChunk: true,
        metadata: undefined,
      }),
    );
    const summary: Message = {
      messageId: randomUUID(),
      contextId,
      taskId,
      role: Role.ROLE_AGENT,
      parts: [{ content: { $case: "text", value: `${output.words} words, ${output.sentences} sentences` }, metadata: undefined, filename: "", mediaType: "" }],
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
    };
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: { state: TaskState.TASK_STATE_COMPLETED, message: summary, timestamp: now() }, metadata: undefined }));
    bus.finished();
  },
  async cancelTask(taskId: string, bus: ExecutionEventBus): Promise<void> {
    // Nothing runs long enough to cancel; a late cancel is answered as the SDK requires.
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId: "", status: { state: TaskState.TASK_STATE_CANCELED, message: undefined, timestamp: now() }, metadata: undefined }));
    bus.finished();
  },
};

function agentCard(): AgentCard {
  return {
    name: "A2A-js text analysis peer",
    description: "Counts characters, words and sentences of a text and lists its most frequent words (the Synapse bench's peer).",
    // URLs are filled in once the ports are bound.
    supportedInterfaces: [
      { url: "", protocolBinding: "GRPC", tenant: "", protocolVersion: PROTOCOL_VERSION },
      { url: "", protocolBinding: "JSONRPC", tenant: "", protocolVersion: PROTOCOL_VERSION },
    ],
    provider: undefined,
    version: "1.0.0",
    capabilities: { streaming: false, pushNotifications: false, extensions: [] },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ["text/plain"],
    defaultOutputModes: ["application/json", "text/plain"],
    skills: [
      {
        id: "text_analysis",
        name: "Text analysis",
        description: "Character, word and sentence counts and the most frequent words.",
        tags: ["text"],
        examples: [],
        inputModes: ["text/plain"],
        outputModes: ["application/json"],
        securityRequirements: [],
      },
    ],
    signatures: [],
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { host: { type: "string", default: "127.0.0.1" }, "grpc-port": { type: "string", default: "0" }, "http-port": { type: "string", default: "0" } },
    strict: true,
  });
  const host = values.host;
  const card = agentCard();
  const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), textAnalysisExecutor);

  const grpcServer = new grpc.Server();
  grpcServer.addService(A2AService, grpcService({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  const grpcPort = await new Promise<number>((resolve, reject) =>
    grpcServer.bindAsync(`${host}:${values["grpc-port"]}`, grpc.ServerCredentials.createInsecure(), (error, port) => (error ? reject(error) : resolve(port))),
  );

  const app = express();
  app.use("/", jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  const http = app.listen(Number(values["http-port"]), host);
  await new Promise<void>((resolve, reject) => {
    http.once("listening", resolve);
    http.once("error", reject);
  });
  // No idle cut-off for kept-alive load-generator connections between turns.
  http.keepAliveTimeout = 0;
  const httpPort = (http.address() as AddressInfo).port;

  const grpcUrl = `http://${host}:${grpcPort}`;
  const jsonRpcUrl = `http://${host}:${httpPort}/`;
  card.supportedInterfaces[0]!.url = grpcUrl;
  card.supportedInterfaces[1]!.url = jsonRpcUrl;

  const stop = () => {
    http.close();
    http.closeAllConnections();
    grpcServer.tryShutdown(() => process.exit(0));
    setTimeout(() => process.exit(0), 2000).unref();
  };
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
  process.stdout.write(`a2a-js peer listening grpc=${grpcUrl} jsonrpc=${jsonRpcUrl}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`a2a-js peer failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
