// A small in-memory A2AService for testing the bindings alone: what a message
// says decides what the service does ("fail:TaskNotFound" throws that A2A
// error, "boom" an unexpected one, "slow" streams until cancelled), and it
// records what each call saw of its context.
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type HandlerContext } from "@connectrpc/connect";
import {
  TaskSchema,
  TaskState,
  type StreamResponseSchema,
  type Task,
  type TaskPushNotificationConfig,
} from "../../gen/lf/a2a/v1/a2a_pb.js";
import type { A2AServiceImpl } from "../../src/a2a/http-call.js";
import { a2aError, type A2AErrorKind } from "../../src/a2a/errors.js";
import { LAST_EVENT_ID_HEADER, withStreamEventId } from "../../src/a2a/stream-event-id.js";
import { activateExtensions } from "../../src/a2a/version.js";

export const SUPPORTED_EXTENSION = "https://example.org/ext/supported/v1";

export interface SeenCall {
  method: string;
  protocol: string;
  headers: Headers;
  request: unknown;
  signal: AbortSignal;
  timeoutMs: number | undefined;
}

export interface FakeA2A {
  service: A2AServiceImpl;
  calls: SeenCall[];
  tasks: Map<string, Task>;
  /** The last call of a method. */
  last(method: string): SeenCall | undefined;
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => (clearTimeout(timer), reject(signal.reason)), { once: true });
  });

function textOf(message: { parts: { content: { case: string | undefined; value?: unknown } }[] } | undefined): string {
  const part = message?.parts[0]?.content;
  return part?.case === "text" ? String(part.value) : "";
}

/** What a "fail:..." or "boom" text throws. */
function failureOf(text: string): Error | undefined {
  if (text.startsWith("fail:")) return a2aError(text.slice(5) as A2AErrorKind, `asked to fail with ${text.slice(5)}`, { metadata: { asked: "yes" } });
  if (text === "boom") return new Error("secret database path /var/lib/x");
  if (text === "invalid-argument") return new ConnectError("the thing is not right", Code.InvalidArgument);
  if (text === "not-found") return new ConnectError("row 17 missing in table tasks", Code.NotFound);
  if (text === "unauthenticated") return new ConnectError("no credentials", Code.Unauthenticated);
  return undefined;
}

export function fakeA2A(): FakeA2A {
  const calls: SeenCall[] = [];
  const tasks = new Map<string, Task>();
  const configs = new Map<string, TaskPushNotificationConfig>();
  let next = 0;
  const seen = (method: string, request: unknown, ctx: HandlerContext) => {
    calls.push({ method, protocol: ctx.protocolName, headers: ctx.requestHeader, request, signal: ctx.signal, timeoutMs: ctx.timeoutMs() });
    activateExtensions(ctx, new Set([SUPPORTED_EXTENSION]));
  };
  const newTask = (text: string, contextId: string, state: TaskState): Task => {
    const id = `task-${++next}`;
    const task = create(TaskSchema, {
      id,
      contextId: contextId || `ctx-${next}`,
      status: { state, timestamp: timestampFromDate(new Date("2026-01-02T03:04:05.678Z")) },
      artifacts: [{ artifactId: "a1", parts: [{ content: { case: "text", value: `echo: ${text}` } }] }],
      history: [{ messageId: `m-${next}`, role: 1, parts: [{ content: { case: "text", value: text } }] }],
    });
    tasks.set(id, task);
    return task;
  };
  const found = (id: string) => {
    const task = tasks.get(id);
    if (task === undefined) throw a2aError("TaskNotFound", `no task ${id}`, { metadata: { taskId: id } });
    return task;
  };
  /** The events of a streamed task, tagged 1, 2, 3...; from after Last-Event-ID when the client resumes. */
  async function* events(task: Task, ctx: HandlerContext, slow: boolean): AsyncGenerator<MessageInitShape<typeof StreamResponseSchema>> {
    const after = Number(ctx.requestHeader.get(LAST_EVENT_ID_HEADER) ?? 0);
    const all: MessageInitShape<typeof StreamResponseSchema>[] = [
      { payload: { case: "task", value: create(TaskSchema, { id: task.id, contextId: task.contextId, status: { state: TaskState.SUBMITTED }, history: task.history }) } },
      { payload: { case: "statusUpdate", value: { taskId: task.id, contextId: task.contextId, status: { state: TaskState.WORKING } } } },
      { payload: { case: "artifactUpdate", value: { taskId: task.id, contextId: task.contextId, artifact: task.artifacts[0], lastChunk: true } } },
    ];
    for (const [index, event] of all.entries()) {
      if (index + 1 > after) yield withStreamEventId(event, index + 1);
    }
    if (slow) {
      for (;;) await sleep(60_000, ctx.signal);
    }
    if (textOf(task.history[0]) === "stream-fail") throw a2aError("InvalidAgentResponse", "the agent said something odd");
    yield withStreamEventId({ payload: { case: "statusUpdate", value: { taskId: task.id, contextId: task.contextId, status: { state: TaskState.COMPLETED } } } }, all.length + 1);
  }

  const service: A2AServiceImpl = {
    async sendMessage(request, ctx) {
      seen("SendMessage", request, ctx);
      const text = textOf(request.message);
      const failure = failureOf(text);
      if (failure !== undefined) throw failure;
      if (text === "wait") await sleep(60_000, ctx.signal);
      if (text === "reply-with-message") return { payload: { case: "message", value: { messageId: "r1", role: 2, parts: [{ content: { case: "text", value: "hi" } }] } } };
      return { payload: { case: "task", value: newTask(text, request.message?.contextId ?? "", TaskState.COMPLETED) } };
    },
    async *sendStreamingMessage(request, ctx) {
      seen("SendStreamingMessage", request, ctx);
      const text = textOf(request.message);
      const failure = failureOf(text);
      if (failure !== undefined) throw failure;
      yield* events(newTask(text, request.message?.contextId ?? "", TaskState.COMPLETED), ctx, text === "slow");
    },
    async getTask(request, ctx) {
      seen("GetTask", request, ctx);
      return found(request.id);
    },
    async listTasks(request, ctx) {
      seen("ListTasks", request, ctx);
      const all = [...tasks.values()].filter((task) => request.contextId === "" || task.contextId === request.contextId);
      return { tasks: all, nextPageToken: "", pageSize: request.pageSize ?? 50, totalSize: all.length };
    },
    async cancelTask(request, ctx) {
      seen("CancelTask", request, ctx);
      const task = found(request.id);
      if (task.status?.state === TaskState.CANCELED) throw a2aError("TaskNotCancelable", `task ${request.id} has ended`);
      task.status = { $typeName: "lf.a2a.v1.TaskStatus", state: TaskState.CANCELED };
      return task;
    },
    async *subscribeToTask(request, ctx) {
      seen("SubscribeToTask", request, ctx);
      const task = found(request.id);
      if (textOf(task.history[0]) !== "slow" && ctx.requestHeader.get(LAST_EVENT_ID_HEADER) === null) {
        throw a2aError("UnsupportedOperation", `task ${request.id} has ended: there is nothing to subscribe to`);
      }
      yield* events(task, ctx, textOf(task.history[0]) === "slow");
    },
    async createTaskPushNotificationConfig(request, ctx) {
      seen("CreateTaskPushNotificationConfig", request, ctx);
      found(request.taskId);
      const config = { ...request, id: request.id || `cfg-${configs.size + 1}` };
      configs.set(`${request.taskId}/${config.id}`, config);
      return config;
    },
    async getTaskPushNotificationConfig(request, ctx) {
      seen("GetTaskPushNotificationConfig", request, ctx);
      const config = configs.get(`${request.taskId}/${request.id}`);
      if (config === undefined) throw a2aError("TaskNotFound", `no config ${request.id}`);
      return config;
    },
    async listTaskPushNotificationConfigs(request, ctx) {
      seen("ListTaskPushNotificationConfigs", request, ctx);
      return { configs: [...configs.values()].filter((config) => config.taskId === request.taskId) };
    },
    async deleteTaskPushNotificationConfig(request, ctx) {
      seen("DeleteTaskPushNotificationConfig", request, ctx);
      if (!configs.delete(`${request.taskId}/${request.id}`)) throw a2aError("TaskNotFound", `no config ${request.id}`);
      return {};
    },
    async getExtendedAgentCard(request, ctx) {
      seen("GetExtendedAgentCard", request, ctx);
      return { name: "fake", description: "a fake agent", version: "1.0.0", capabilities: { streaming: true } };
    },
  };
  return { service, calls, tasks, last: (method) => calls.filter((call) => call.method === method).at(-1) };
}
