// The official @a2a-js/sdk client, on one of the JSON bindings (JSON-RPC or
// REST), driving a real Synapse server whose A2A service runs on the
// engine: the flows every A2A client uses, shared by both bindings' tests.
import { create } from "@bufbuild/protobuf";
import { Role, TaskState, type Message, type Part, type StreamResponse, type Task } from "@a2a-js/sdk";
import { ClientFactory, ClientFactoryOptions, type Client } from "@a2a-js/sdk/client";
import { randomUUID } from "node:crypto";
import http from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SupportedTaskTypeSchema } from "../../gen/synapse/v1/capabilities_pb.js";
import type { TaskHandler } from "../../src/agent/handler.js";
import type { AgentIdentity } from "../../src/agent/identity.js";
import { issueToken } from "../../src/crypto/tokens.js";
import { requesterIdentity, startTestServer, type TestServer } from "./server.js";

const EXECUTOR = "executor_a2a_json";

const handlers = new Map<string, TaskHandler>([
  ["echo", { async executeTask(ctx) { return { output: { echoed: ctx.payload.text ?? null }, summary: "echoed" }; } }],
  [
    "ask",
    {
      async executeTask(ctx) {
        const answer = await ctx.askForInfo([{ field: "style", reason: "how the answer should read" }], "Which style?");
        return { output: { style: answer.style ?? null }, summary: "styled" };
      },
    },
  ],
  [
    "hold",
    {
      async executeTask(ctx) {
        await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve(), { once: true }));
        return { output: {} };
      },
    },
  ],
]);

const taskType = (type: string, inputSchema: object) => create(SupportedTaskTypeSchema, { type, name: type, description: `the ${type} task`, inputSchema: JSON.stringify(inputSchema) });

const part = (content: Part["content"]): Part => ({ content, metadata: undefined, filename: "", mediaType: "" });
const textMessage = (text: string, extra: { taskId?: string; contextId?: string } = {}): Message => ({
  messageId: randomUUID(),
  contextId: extra.contextId ?? "",
  taskId: extra.taskId ?? "",
  role: Role.ROLE_USER,
  parts: [part({ $case: "text", value: text })],
  metadata: undefined,
  extensions: [],
  referenceTaskIds: [],
});

async function refusal(attempt: Promise<unknown>): Promise<Error> {
  return attempt.then(
    () => {
      throw new Error("expected a refusal");
    },
    (error: unknown) => error as Error,
  );
}

/** A loopback webhook: the state of each status notification it receives, and their tokens. */
async function webhook(): Promise<{ url: string; states: string[]; tokens: Array<string | undefined>; close(): Promise<void> }> {
  const states: string[] = [];
  const tokens: Array<string | undefined> = [];
  const receiver = http.createServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => (body += chunk.toString()));
    req.on("end", () => {
      const state = (JSON.parse(body) as { statusUpdate?: { status?: { state?: string } } }).statusUpdate?.status?.state;
      if (state !== undefined) states.push(state);
      tokens.push(req.headers["x-a2a-notification-token"] as string | undefined);
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  const { port } = receiver.address() as { port: number };
  return { url: `http://127.0.0.1:${port}/hook`, states, tokens, close: () => new Promise<void>((resolve) => receiver.close(() => resolve())) };
}

/** The engine flows with the SDK client over `binding`; `path` is where the binding lives on the server. */
export function describeEngineFlows(binding: "JSONRPC" | "HTTP+JSON", path: string): void {
  let server: TestServer;
  let alice: AgentIdentity;
  let bob: AgentIdentity;
  let client: Client;
  const as = async (identity: AgentIdentity) => ({ serviceParameters: { authorization: `Bearer ${await issueToken(identity.key, { agentId: identity.agentId, audience: EXECUTOR })}` } });
  const send = async (message: Message, identity = alice, returnImmediately = false, metadata?: Record<string, unknown>) =>
    (await client.sendMessage(
      { tenant: "", message, configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately, historyLength: undefined }, metadata },
      await as(identity),
    )) as Task;

  beforeAll(async () => {
    alice = await requesterIdentity();
    bob = await requesterIdentity();
    server = await startTestServer({
      agentId: EXECUTOR,
      handlers,
      capabilities: { supportedTaskTypes: [taskType("echo", { type: "object", properties: { text: { type: "string" } }, required: ["text"] }), taskType("ask", { type: "object" }), taskType("hold", { type: "object" })] },
      // Every binding served, in the card too (the card's default lists gRPC only for now).
      a2a: { defaultSkill: "echo", bindings: ["JSONRPC", "HTTP+JSON", "GRPC"] },
    });
    client = await new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: [binding] })).createFromUrl(server.url);
  });
  afterAll(() => server?.close());

  describe(`the @a2a-js/sdk ${binding} client on the engine`, () => {
    it("finds the binding in the signed card", async () => {
      const card = (await (await fetch(`${server.url}/.well-known/agent-card.json`)).json()) as { supportedInterfaces: Array<{ url: string; protocolBinding: string }> };
      expect(card.supportedInterfaces).toContainEqual(expect.objectContaining({ protocolBinding: binding, url: `${server.url}${path}` }));
    });

    it("sends, gets with historyLength, lists and cancels", async () => {
      const task = await send(textMessage("hello json"));
      expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      expect(task.artifacts[0]?.parts.find((p) => p.content?.$case === "data")?.content?.value).toEqual({ echoed: "hello json" });
      const read = await client.getTask({ tenant: "", id: task.id, historyLength: 1 }, await as(alice));
      expect(read.history).toHaveLength(1);
      expect((await refusal(client.getTask({ tenant: "", id: task.id, historyLength: undefined }, await as(bob)))).name).toBe("TaskNotFoundError");
      const contextId = randomUUID();
      await send(textMessage("one", { contextId }));
      await send(textMessage("two", { contextId }));
      const page = await client.listTasks(
        { tenant: "", contextId, status: TaskState.TASK_STATE_UNSPECIFIED, pageSize: 10, pageToken: "", historyLength: undefined, statusTimestampAfter: undefined, includeArtifacts: undefined },
        await as(alice),
      );
      expect(page.tasks).toHaveLength(2);
      const held = await send(textMessage("wait"), alice, true, { taskType: "hold" });
      expect((await client.cancelTask({ tenant: "", id: held.id, metadata: undefined }, await as(alice))).status?.state).toBe(TaskState.TASK_STATE_CANCELED);
      expect((await refusal(client.cancelTask({ tenant: "", id: held.id, metadata: undefined }, await as(alice)))).name).toBe("TaskNotCancelableError");
    });

    it("streams a task to its end", async () => {
      const items: StreamResponse[] = [];
      for await (const item of client.sendMessageStream({ tenant: "", message: textMessage("streamed"), configuration: undefined, metadata: undefined }, await as(alice))) items.push(item);
      expect(items[0]?.payload?.$case).toBe("task");
      expect(items.some((item) => item.payload?.$case === "artifactUpdate")).toBe(true);
      const last = items.at(-1)?.payload;
      expect(last?.$case === "statusUpdate" && last.value.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    });

    it("answers input-required with a follow-up message", async () => {
      const task = await send(textMessage("go"), alice, false, { taskType: "ask" });
      expect(task.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
      const done = await send(textMessage("formal", { taskId: task.id, contextId: task.contextId }));
      expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      expect(done.artifacts[0]?.parts[0]?.content?.value).toEqual({ style: "formal" });
    });

    it("resubscribes after a dropped stream and follows the task to its end", async () => {
      const controller = new AbortController();
      let taskId = "";
      const dropped = (async () => {
        for await (const item of client.sendMessageStream({ tenant: "", message: textMessage("hold on"), configuration: undefined, metadata: { taskType: "hold" } }, { ...(await as(alice)), signal: controller.signal })) {
          if (item.payload?.$case === "task") taskId = item.payload.value.id;
          if (item.payload?.$case === "statusUpdate" || taskId !== "") controller.abort();
        }
      })().catch((error: unknown) => error);
      await dropped;
      expect(taskId).not.toBe("");
      const following = (async () => {
        const items: StreamResponse[] = [];
        for await (const item of client.resubscribeTask({ tenant: "", id: taskId }, await as(alice))) items.push(item);
        return items;
      })();
      await new Promise((resolve) => setTimeout(resolve, 200));
      await client.cancelTask({ tenant: "", id: taskId, metadata: undefined }, await as(alice));
      const items = await following;
      expect(items[0]?.payload?.$case).toBe("task");
      const last = items.at(-1)?.payload;
      expect(last?.$case === "statusUpdate" && last.value.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
      expect((await refusal((async () => { for await (const _ of client.resubscribeTask({ tenant: "", id: taskId }, await as(alice))); })())).name).toBe("UnsupportedOperationError");
    });

    it("creates, reads, lists and deletes push notification configs, and the kept one is notified", async () => {
      const hook = await webhook();
      try {
        const task = await send(textMessage("hold on"), alice, true, { taskType: "hold" });
        const config = (id: string) => ({ tenant: "", id, taskId: task.id, url: hook.url, token: `tok-${id}`, authentication: undefined });
        expect(await client.createTaskPushNotificationConfig(config("kept"), await as(alice))).toMatchObject({ id: "kept", taskId: task.id, url: hook.url });
        await client.createTaskPushNotificationConfig(config("dropped"), await as(alice));
        expect((await client.getTaskPushNotificationConfig({ tenant: "", taskId: task.id, id: "kept" }, await as(alice))).token).toBe("tok-kept");
        await client.deleteTaskPushNotificationConfig({ tenant: "", taskId: task.id, id: "dropped" }, await as(alice));
        const listed = await client.listTaskPushNotificationConfig({ tenant: "", taskId: task.id, pageSize: 0, pageToken: "" }, await as(alice));
        expect(listed.configs.map((c) => c.id)).toEqual(["kept"]);
        expect((await refusal(client.getTaskPushNotificationConfig({ tenant: "", taskId: task.id, id: "kept" }, await as(bob)))).name).toBe("TaskNotFoundError");
        await client.cancelTask({ tenant: "", id: task.id, metadata: undefined }, await as(alice));
        await expect.poll(() => hook.states.includes("TASK_STATE_CANCELED"), { timeout: 5000 }).toBe(true);
        expect(new Set(hook.tokens)).toEqual(new Set(["tok-kept"]));
      } finally {
        await hook.close();
      }
    });

    it("refuses a caller without a token", async () => {
      const error = await refusal(client.getTask({ tenant: "", id: "x", historyLength: undefined }));
      expect(error.message).toMatch(/Authorization|bearer|unauthenticated|token/i);
    });
  });
}

/** The server and a caller's Authorization header, for plain curl-shaped calls. */
export async function startEngineServer(): Promise<{ server: TestServer; authorization: () => Promise<string> }> {
  const caller = await requesterIdentity();
  const server = await startTestServer({ agentId: EXECUTOR, handlers, capabilities: { supportedTaskTypes: [taskType("echo", { type: "object" })] }, a2a: { defaultSkill: "echo" } });
  return { server, authorization: async () => `Bearer ${await issueToken(caller.key, { agentId: caller.agentId, audience: EXECUTOR })}` };
}
