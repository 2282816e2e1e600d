// lf.a2a.v1.A2AService on the Synapse engine: the one object every A2A
// binding calls (gRPC through the Connect router, JSON-RPC and REST through
// createHandlerContext). Each method resolves the caller from the request
// headers, then hands the request to the engine's intake, steering or reads.
import type { JsonObject } from "@bufbuild/protobuf";
import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { A2AService, SendMessageResponseSchema, type SendMessageRequest } from "../../gen/lf/a2a/v1/a2a_pb.js";
import { EmptySchema } from "@bufbuild/protobuf/wkt";
import type { TaskRecord } from "../store/store.js";
import type { Agent } from "../agent/agent.js";
import { TaskSchemas } from "../agent/schemas.js";
import { callAbortOf } from "../server/call-abort.js";
import { resolveA2ACaller, type A2ACaller } from "./auth.js";
import { directReplyMessage, type ConvertContext } from "./convert.js";
import { a2aError } from "./errors.js";
import { getTask, historyShape, listTasks, loadTask } from "./read.js";
import { acceptMessage, cancelTask, type SendContext } from "./send.js";
import { followTask, subscribe, type FollowOptions } from "./stream.js";
import { createPushConfig, deletePushConfig, getPushConfig, listPushConfigs, type PushContext } from "./push-configs.js";

export interface A2AServiceDeps {
  agent: Agent;
  /** Aborts when the server drains: waits and streams end. */
  draining: AbortSignal;
  /** Admit callers without credentials as one anonymous party (`synapse serve --a2a-open`). */
  open?: boolean;
  /** The task type a message names no skill for, when the agent has several (`--a2a-skill`). */
  defaultSkill?: string;
  /** Where push-notification configs live and who delivers them; without it push notifications are not supported. */
  push?: PushContext;
}

/** The caller of a call, from its request headers. */
export function a2aCallerOf(deps: A2AServiceDeps, ctx: HandlerContext): Promise<A2ACaller> {
  return resolveA2ACaller(ctx.requestHeader, { audience: deps.agent.identity.agentId, trust: deps.agent.trust, operatorKeyIds: deps.agent.operatorKeyIds, open: deps.open });
}

/** What the converter reads of the agent: each task type's input schema. */
export function convertContextOf(agent: Agent): ConvertContext {
  const schemas = new Map<string, JsonObject | undefined>();
  for (const taskType of agent.provider.getCapabilities().supportedTaskTypes) {
    schemas.set(taskType.type, taskType.inputSchema ? (JSON.parse(taskType.inputSchema) as JsonObject) : undefined);
  }
  return { inputSchemaOf: (taskType) => schemas.get(taskType) };
}

export function createA2AService(deps: A2AServiceDeps): ServiceImpl<typeof A2AService> {
  const { agent, draining } = deps;
  const convert = convertContextOf(agent);
  const send: SendContext = { agent, schemas: new TaskSchemas(agent.provider.getCapabilities().supportedTaskTypes), defaultSkill: deps.defaultSkill };
  const maxWaitMs = () => agent.provider.getCapabilities().maxTaskDurationSeconds * 1000;
  const follow = (caller: A2ACaller, ctx: HandlerContext): FollowOptions => ({ agent, convert, caller, stop: [callAbortOf(ctx), draining] });
  const pushContext = (): PushContext => {
    if (deps.push === undefined) throw a2aError("PushNotificationNotSupported", "this agent does not send push notifications");
    return deps.push;
  };
  /** A message's task, with the webhook its configuration names kept for every update of it. */
  const accept = async (caller: A2ACaller, request: SendMessageRequest): Promise<TaskRecord> => {
    const webhook = request.configuration?.taskPushNotificationConfig;
    const push = webhook === undefined ? undefined : pushContext();
    const task = await acceptMessage(send, caller, request);
    if (push !== undefined && webhook !== undefined) await createPushConfig(push, caller, { ...webhook, taskId: task.taskId }, true);
    return task;
  };
  return {
    async sendMessage(request, ctx) {
      const caller = await a2aCallerOf(deps, ctx);
      const historyLength = historyShape(request.configuration?.historyLength, "configuration.historyLength");
      let task = await accept(caller, request);
      if (request.configuration?.returnImmediately !== true) {
        // Blocking: until the task ends or waits for the client (input required), or the longest a task may run.
        task = (await agent.engine.waitForOutcome(task.taskId, maxWaitMs(), [callAbortOf(ctx), draining])) ?? task;
      }
      const reply = directReplyMessage(task);
      if (reply !== undefined) return create(SendMessageResponseSchema, { payload: { case: "message", value: reply } });
      return create(SendMessageResponseSchema, { payload: { case: "task", value: await loadTask(agent, convert, task, { historyLength }) } });
    },
    async *sendStreamingMessage(request, ctx) {
      const caller = await a2aCallerOf(deps, ctx);
      const historyLength = historyShape(request.configuration?.historyLength, "configuration.historyLength");
      const task = await accept(caller, request);
      yield* followTask(follow(caller, ctx), task, historyLength);
    },
    async getTask(request, ctx) {
      const caller = await a2aCallerOf(deps, ctx);
      return getTask(agent, convert, caller, request.id, request.historyLength);
    },
    async listTasks(request, ctx) {
      const caller = await a2aCallerOf(deps, ctx);
      return listTasks(agent, convert, caller, request);
    },
    async cancelTask(request, ctx) {
      const caller = await a2aCallerOf(deps, ctx);
      const task = await cancelTask(agent, caller, request.id);
      return loadTask(agent, convert, task, {});
    },
    async *subscribeToTask(request, ctx) {
      const caller = await a2aCallerOf(deps, ctx);
      yield* subscribe(follow(caller, ctx), request.id);
    },
    async createTaskPushNotificationConfig(request, ctx) {
      const caller = await a2aCallerOf(deps, ctx);
      return createPushConfig(pushContext(), caller, request);
    },
    async getTaskPushNotificationConfig(request, ctx) {
      const caller = await a2aCallerOf(deps, ctx);
      return getPushConfig(pushContext(), caller, request.taskId, request.id);
    },
    async listTaskPushNotificationConfigs(request, ctx) {
      const caller = await a2aCallerOf(deps, ctx);
      return listPushConfigs(pushContext(), caller, request.taskId, request.pageSize);
    },
    async deleteTaskPushNotificationConfig(request, ctx) {
      const caller = await a2aCallerOf(deps, ctx);
      await deletePushConfig(pushContext(), caller, request.taskId, request.id);
      return create(EmptySchema);
    },
    async getExtendedAgentCard(_request, ctx) {
      await a2aCallerOf(deps, ctx);
      throw a2aError("ExtendedAgentCardNotConfigured", "this agent has no extended agent card");
    },
  };
}
