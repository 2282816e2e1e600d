// A2A v1.0 over gRPC on the Synapse engine, driven by the official
// @a2a-js/sdk client (its gRPC transport on @grpc/grpc-js) against a real
// server on a real socket: tasks made by SendMessage run the agent's
// handlers, wait for information and for humans, are cancelled, listed,
// followed, and are the same tasks Synapse's own GetTask reads.
import { create } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { Role, TaskState, type Message, type Part, type StreamResponse, type Task } from "@a2a-js/sdk";
import { ClientFactory, ClientFactoryOptions, type Client } from "@a2a-js/sdk/client";
import { GrpcTransportFactory } from "@a2a-js/sdk/client/grpc";
import { randomUUID } from "node:crypto";
import http from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SupportedTaskTypeSchema } from "../gen/synapse/v1/capabilities_pb.js";
import { P2PService } from "../gen/synapse/v1/p2p_pb.js";
import { TaskState as SynapseState } from "../gen/synapse/v1/payloads_pb.js";
import type { TaskHandler } from "../src/agent/handler.js";
import type { AgentIdentity } from "../src/agent/identity.js";
import { issueToken } from "../src/crypto/tokens.js";
import { verifies } from "./helpers/independent-verify.js";
import { requesterIdentity, startTestServer, type TestServer } from "./helpers/server.js";

const EXECUTOR = "executor_a2a_grpc";

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
    "gate",
    {
      async executeTask(ctx) {
        await ctx.askHuman({ code: "approval_required", message: "Approve this run", taskSummary: "gate", blockedReason: "approval", escalationLevel: 1, options: [] });
        return { output: { approved: true, note: ctx.payload.note ?? null } };
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
const textInput = { type: "object", properties: { text: { type: "string" } }, required: ["text"] };

let server: TestServer;
let alice: AgentIdentity;
let bob: AgentIdentity;
let client: Client;

beforeAll(async () => {
  alice = await requesterIdentity();
  bob = await requesterIdentity();
  server = await startTestServer({
    agentId: EXECUTOR,
    handlers,
    capabilities: { supportedTaskTypes: [taskType("echo", textInput), taskType("ask", { type: "object" }), taskType("gate", { type: "object" }), taskType("hold", { type: "object" })] },
    a2a: { defaultSkill: "echo" },
    config: { retryBaseDelayMs: 20, retryMaxDelayMs: 100 },
  });
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { transports: [new GrpcTransportFactory()], preferredTransports: ["GRPC"] }));
  client = await factory.createFromUrl(server.url);
});
afterAll(() => server?.close());

async function as(identity: AgentIdentity) {
  return { serviceParameters: { authorization: `Bearer ${await issueToken(identity.key, { agentId: identity.agentId, audience: EXECUTOR })}` } };
}

const part = (content: Part["content"]): Part => ({ content, metadata: undefined, filename: "", mediaType: "" });
const dataPart = (value: unknown): Part => part({ $case: "data", value });

const textMessage = (text: string, extra: { taskId?: string; contextId?: string; metadata?: Record<string, unknown> } = {}): Message => ({
  messageId: randomUUID(),
  contextId: extra.contextId ?? "",
  taskId: extra.taskId ?? "",
  role: Role.ROLE_USER,
  parts: [part({ $case: "text", value: text })],
  metadata: extra.metadata,
  extensions: [],
  referenceTaskIds: [],
});

const send = async (message: Message, identity = alice, configuration?: { returnImmediately?: boolean; historyLength?: number }, metadata?: Record<string, unknown>) =>
  (await client.sendMessage(
    { tenant: "", message, configuration: configuration && { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately: false, ...configuration }, metadata },
    await as(identity),
  )) as Task;

async function collect(stream: AsyncIterable<StreamResponse>): Promise<StreamResponse[]> {
  const items: StreamResponse[] = [];
  for await (const item of stream) items.push(item);
  return items;
}

async function refusal(attempt: Promise<unknown>): Promise<Error> {
  return attempt.then(
    () => {
      throw new Error("expected a refusal");
    },
    (error: unknown) => error as Error,
  );
}

describe("A2A over gRPC with the @a2a-js/sdk client", () => {
  it("reads the card and runs a blocking SendMessage to completion, with the result as an artifact", async () => {
    const task = await send(textMessage("hello a2a"));
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(task.contextId).not.toBe("");
    const data = task.artifacts[0]?.parts.find((part) => part.content?.$case === "data")?.content;
    expect(data?.value).toEqual({ echoed: "hello a2a" });
    expect(task.history[0]?.role).toBe(Role.ROLE_USER);
    expect(task.history.at(-1)?.role).toBe(Role.ROLE_AGENT);
  });

  it("returns at once with returnImmediately, and the same messageId again gives the same task", async () => {
    const message = textMessage("later");
    const first = await send(message, alice, { returnImmediately: true });
    expect([TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_COMPLETED]).toContain(first.status?.state);
    const again = await send(message, alice);
    expect(again.id).toBe(first.id);
    // Another message under a used id is refused.
    const reuse = { ...textMessage("something else"), messageId: message.messageId };
    expect((await refusal(send(reuse))).message).toMatch(/already used|replay|message id/i);
  });

  it("refuses input that does not match the skill's schema, naming the field", async () => {
    const message = { ...textMessage("x"), parts: [dataPart({ other: 1 })] };
    const error = await refusal(send(message));
    expect(error.message).toMatch(/text/);
  });

  it("streams a task: the Task first, then status updates and the artifact, ending when it completes", async () => {
    const items = await collect(client.sendMessageStream({ tenant: "", message: textMessage("streamed"), configuration: undefined, metadata: undefined }, await as(alice)));
    expect(items[0]?.payload?.$case).toBe("task");
    const last = items.at(-1)?.payload;
    expect(last?.$case).toBe("statusUpdate");
    if (last?.$case === "statusUpdate") expect(last.value.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(items.some((item) => item.payload?.$case === "artifactUpdate")).toBe(true);
  });

  it("surfaces need-info as input-required with the missing fields, answered by a follow-up message", async () => {
    const task = await send(textMessage("go"), alice, undefined, { taskType: "ask" });
    expect(task.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const parts = task.status?.message?.parts ?? [];
    expect(parts[0]?.content).toEqual({ $case: "text", value: "Which style?" });
    const need = parts.find((part) => part.content?.$case === "data")?.content?.value as { missingFields: Array<{ field: string }>; schema: { required: string[] } };
    expect(need.missingFields.map((field) => field.field)).toEqual(["style"]);
    expect(need.schema.required).toEqual(["style"]);
    // Bob may not answer Alice's task: to him it does not exist.
    expect((await refusal(send(textMessage("formal", { taskId: task.id }), bob))).message).toMatch(/not found|no task/i);
    const done = await send(textMessage("formal", { taskId: task.id, contextId: task.contextId }));
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(done.artifacts[0]?.parts[0]?.content?.value).toEqual({ style: "formal" });
    const roles = done.history.map((message) => message.role);
    expect(roles).toEqual([Role.ROLE_USER, Role.ROLE_AGENT, Role.ROLE_USER, Role.ROLE_AGENT]);
  });

  it("takes a human decision as a data part on the waiting task", async () => {
    const task = await send(textMessage("please"), alice, undefined, { taskType: "gate" });
    expect(task.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const decision = { ...textMessage(""), taskId: task.id, parts: [dataPart({ decision: "modify", fields: { note: "changed" } })] };
    const done = await send(decision);
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(done.artifacts[0]?.parts[0]?.content?.value).toEqual({ approved: true, note: "changed" });
  });

  it("cancels a running task, and refuses to cancel it twice (TaskNotCancelable)", async () => {
    const task = await send(textMessage("wait"), alice, { returnImmediately: true }, { taskType: "hold" });
    const cancelled = await client.cancelTask({ tenant: "", id: task.id, metadata: undefined }, await as(alice));
    expect(cancelled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    const error = await refusal(client.cancelTask({ tenant: "", id: task.id, metadata: undefined }, await as(alice)));
    expect(error.name).toBe("TaskNotCancelableError");
  });

  it("hides one caller's tasks from another (TaskNotFound), and serves GetTask with historyLength", async () => {
    const task = await send(textMessage("mine"));
    const error = await refusal(client.getTask({ tenant: "", id: task.id, historyLength: undefined }, await as(bob)));
    expect(error.name).toBe("TaskNotFoundError");
    const read = await client.getTask({ tenant: "", id: task.id, historyLength: 1 }, await as(alice));
    expect(read.id).toBe(task.id);
    expect(read.history).toHaveLength(1);
    const none = await client.getTask({ tenant: "", id: task.id, historyLength: 0 }, await as(alice));
    expect(none.history).toHaveLength(0);
  });

  it("lists the caller's tasks by context, a page at a time", async () => {
    const carol = await requesterIdentity();
    const contextId = randomUUID();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await send(textMessage(`c${i}`, { contextId }), carol)).id);
    await send(textMessage("elsewhere"), carol);
    const seen: string[] = [];
    let pageToken = "";
    do {
      const page = await client.listTasks(
        { tenant: "", contextId, status: TaskState.TASK_STATE_UNSPECIFIED, pageSize: 2, pageToken, historyLength: undefined, statusTimestampAfter: undefined, includeArtifacts: undefined },
        await as(carol),
      );
      expect(page.totalSize).toBe(3);
      expect(page.tasks.length).toBeLessThanOrEqual(2);
      seen.push(...page.tasks.map((task) => task.id));
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
    expect(seen.sort()).toEqual([...ids].sort());
    const bobs = await client.listTasks({ tenant: "", contextId, status: TaskState.TASK_STATE_UNSPECIFIED, pageSize: 10, pageToken: "", historyLength: undefined, statusTimestampAfter: undefined, includeArtifacts: undefined }, await as(bob));
    expect(bobs.tasks).toHaveLength(0);
  });

  it("resubscribes to a waiting task and follows it to its end; a finished task has nothing to follow", async () => {
    const task = await send(textMessage("go"), alice, { returnImmediately: true }, { taskType: "hold" });
    const following = collect(client.resubscribeTask({ tenant: "", id: task.id }, await as(alice)));
    await new Promise((resolve) => setTimeout(resolve, 200));
    await client.cancelTask({ tenant: "", id: task.id, metadata: undefined }, await as(alice));
    const items = await following;
    expect(items[0]?.payload?.$case).toBe("task");
    const last = items.at(-1)?.payload;
    expect(last?.$case === "statusUpdate" && last.value.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    const error = await refusal(collect(client.resubscribeTask({ tenant: "", id: task.id }, await as(alice))));
    expect(error.name).toBe("UnsupportedOperationError");
  });

  it("is the same task for Synapse's GetTask, with the caller as requester", async () => {
    const task = await send(textMessage("both faces"));
    const p2p = createClient(P2PService, createGrpcTransport({ baseUrl: server.url }));
    const token = await issueToken(alice.key, { agentId: alice.agentId, audience: EXECUTOR });
    const { task: view } = await p2p.getTask({ taskId: task.id }, { headers: { authorization: `Bearer ${token}` } });
    expect(view?.state).toBe(SynapseState.COMPLETED);
    expect(view?.requester?.agentId).toBe(alice.agentId);
    expect(view?.taskType).toBe("echo");
    // Its log is the executor's, every event signed with the agent's key, and says it ended completed.
    const items = [];
    for await (const item of p2p.watch({ taskId: task.id, fromSequence: 1n }, { headers: { authorization: `Bearer ${token}` } })) items.push(item);
    const events = items.flatMap((item) => (item.kind.case === "event" ? [item.kind.value] : []));
    expect(events.length).toBeGreaterThanOrEqual(2);
    for (const event of events) expect(verifies(event.message!.envelope!, server.agent.identity.key.publicKey)).toBe(true);
  });

  it("refuses callers without a token (open mode is off)", async () => {
    const error = await refusal(client.getTask({ tenant: "", id: "x", historyLength: undefined }));
    expect(error.message).toMatch(/Authorization|bearer|unauthenticated/i);
  });
});

/** A webhook on loopback: keeps each notification with its headers; answers `failFirst` of them with 503. */
async function webhook(failFirst = 0) {
  const received: Array<{ body: { statusUpdate?: { status?: { state?: string } }; artifactUpdate?: unknown }; token?: string; authorization?: string }> = [];
  let failures = failFirst;
  const waiters: Array<() => void> = [];
  const receiver = http.createServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => (body += chunk.toString()));
    req.on("end", () => {
      if (failures > 0) {
        failures--;
        res.writeHead(503).end();
        return;
      }
      received.push({ body: JSON.parse(body), token: req.headers["x-a2a-notification-token"] as string | undefined, authorization: req.headers.authorization });
      res.writeHead(200).end();
      for (const wake of waiters.splice(0)) wake();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  const { port } = receiver.address() as { port: number };
  const states = () => received.map((entry) => entry.body.statusUpdate?.status?.state).filter((state) => state !== undefined);
  return {
    url: `http://127.0.0.1:${port}/hook`,
    received,
    states,
    async until(state: string, timeoutMs = 5000) {
      const deadline = Date.now() + timeoutMs;
      while (!states().includes(state)) {
        if (Date.now() > deadline) throw new Error(`no ${state} notification; got ${states().join(", ")}`);
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 100);
        });
      }
    },
    close: () => new Promise<void>((resolve) => receiver.close(() => resolve())),
  };
}

describe("A2A push notifications over gRPC", () => {
  it("delivers a task's updates to the webhook its SendMessage names, with the token and credentials, through a retry", async () => {
    const hook = await webhook(1);
    try {
      const message = textMessage("notify me");
      const configuration = {
        acceptedOutputModes: [],
        returnImmediately: true,
        taskPushNotificationConfig: { tenant: "", id: "", taskId: "", url: hook.url, token: "tok-1", authentication: { scheme: "Bearer", credentials: "cred-1" } },
      };
      const task = (await client.sendMessage({ tenant: "", message, configuration, metadata: undefined }, await as(alice))) as Task;
      await hook.until("TASK_STATE_COMPLETED");
      expect(hook.received.every((entry) => entry.token === "tok-1" && entry.authorization === "Bearer cred-1")).toBe(true);
      expect(hook.received.some((entry) => entry.body.artifactUpdate !== undefined)).toBe(true);
      expect(hook.states().at(-1)).toBe("TASK_STATE_COMPLETED");
      // The config is the task's, readable by its caller; its credentials are not shown back.
      const page = await client.listTaskPushNotificationConfig({ tenant: "", taskId: task.id, pageSize: 0, pageToken: "" }, await as(alice));
      expect(page.configs).toHaveLength(1);
      expect(page.configs[0]?.authentication?.credentials ?? "").toBe("");
    } finally {
      await hook.close();
    }
  });

  it("creates, reads, lists and deletes configs; delivers to the ones kept; refuses addresses the outbound policy refuses", async () => {
    const kept = await webhook();
    const dropped = await webhook();
    try {
      const task = await send(textMessage("hold on"), alice, { returnImmediately: true }, { taskType: "hold" });
      const create = async (id: string, url: string) => client.createTaskPushNotificationConfig({ tenant: "", id, taskId: task.id, url, token: "", authentication: undefined }, await as(alice));
      const created = await client.createTaskPushNotificationConfig({ tenant: "", id: "kept", taskId: task.id, url: kept.url, token: "t", authentication: undefined }, await as(alice));
      expect(created).toMatchObject({ id: "kept", taskId: task.id, url: kept.url });
      await client.createTaskPushNotificationConfig({ tenant: "", id: "dropped", taskId: task.id, url: dropped.url, token: "", authentication: undefined }, await as(alice));
      expect((await client.getTaskPushNotificationConfig({ tenant: "", taskId: task.id, id: "kept" }, await as(alice))).url).toBe(kept.url);
      await client.deleteTaskPushNotificationConfig({ tenant: "", taskId: task.id, id: "dropped" }, await as(alice));
      expect((await client.listTaskPushNotificationConfig({ tenant: "", taskId: task.id, pageSize: 0, pageToken: "" }, await as(alice))).configs.map((config) => config.id)).toEqual(["kept"]);
      // Another caller learns nothing of the task; a link-local webhook is refused.
      expect((await refusal(client.getTaskPushNotificationConfig({ tenant: "", taskId: task.id, id: "kept" }, await as(bob)))).name).toBe("TaskNotFoundError");
      expect((await refusal(create("metadata", "http://169.254.169.254/latest"))).message).toMatch(/url/);
      await client.cancelTask({ tenant: "", id: task.id, metadata: undefined }, await as(alice));
      await kept.until("TASK_STATE_CANCELED");
      expect(dropped.received).toHaveLength(0);
    } finally {
      await kept.close();
      await dropped.close();
    }
  });
});

describe("A2A open mode (--a2a-open)", () => {
  it("admits callers without a token as one anonymous requester, and still holds a token to its checks", async () => {
    const open = await startTestServer({ agentId: "executor_a2a_open", handlers, capabilities: { supportedTaskTypes: [taskType("echo", textInput)] }, a2a: { open: true } });
    try {
      const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { transports: [new GrpcTransportFactory()] }));
      const anonymous = await factory.createFromUrl(open.url);
      const task = (await anonymous.sendMessage({ tenant: "", message: textMessage("no token"), configuration: undefined, metadata: undefined })) as Task;
      expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      expect((await anonymous.getTask({ tenant: "", id: task.id, historyLength: 0 })).id).toBe(task.id);
      // A token for another agent is refused, not taken as anonymous.
      const wrong = { serviceParameters: { authorization: `Bearer ${await issueToken(alice.key, { agentId: alice.agentId, audience: "someone_else" })}` } };
      expect((await refusal(anonymous.getTask({ tenant: "", id: task.id, historyLength: 0 }, wrong))).message).toMatch(/aud|audience|token/i);
    } finally {
      await open.close();
    }
  });
});
