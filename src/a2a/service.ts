// lf.a2a.v1.A2AService on the Synapse engine: the one object every A2A
// binding calls (gRPC through the Connect router, JSON-RPC and REST through
// createHandlerContext). Each method resolves the caller, then hands the
// request to the engine's intake, steering or reads.
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { A2AService } from "../../gen/lf/a2a/v1/a2a_pb.js";
import type { Agent } from "../agent/agent.js";
import { resolveA2ACaller, type A2ACaller } from "./auth.js";
import { a2aError } from "./errors.js";

export interface A2AServiceDeps {
  agent: Agent;
  /** Aborts when the server drains: waits and streams end. */
  draining: AbortSignal;
  /** Admit callers without credentials as one anonymous party (`synapse serve --a2a-open`). */
  open?: boolean;
  /** The task type a message names no skill for, when the agent has several (`--a2a-skill`). */
  defaultSkill?: string;
}

/** The caller of a call, from its request headers. */
export function a2aCallerOf(deps: A2AServiceDeps, ctx: HandlerContext): Promise<A2ACaller> {
  return resolveA2ACaller(ctx.requestHeader, { audience: deps.agent.identity.agentId, trust: deps.agent.trust, operatorKeyIds: deps.agent.operatorKeyIds, open: deps.open });
}

const unsupported = (method: string) => a2aError("UnsupportedOperation", `${method} is not implemented yet`);

export function createA2AService(deps: A2AServiceDeps): ServiceImpl<typeof A2AService> {
  return {
    async sendMessage(_request, ctx) {
      await a2aCallerOf(deps, ctx);
      throw unsupported("SendMessage");
    },
    async *sendStreamingMessage(_request, ctx) {
      await a2aCallerOf(deps, ctx);
      throw unsupported("SendStreamingMessage");
    },
    async getTask(_request, ctx) {
      await a2aCallerOf(deps, ctx);
      throw unsupported("GetTask");
    },
    async listTasks(_request, ctx) {
      await a2aCallerOf(deps, ctx);
      throw unsupported("ListTasks");
    },
    async cancelTask(_request, ctx) {
      await a2aCallerOf(deps, ctx);
      throw unsupported("CancelTask");
    },
    async *subscribeToTask(_request, ctx) {
      await a2aCallerOf(deps, ctx);
      throw unsupported("SubscribeToTask");
    },
    async createTaskPushNotificationConfig(_request, ctx) {
      await a2aCallerOf(deps, ctx);
      throw unsupported("CreateTaskPushNotificationConfig");
    },
    async getTaskPushNotificationConfig(_request, ctx) {
      await a2aCallerOf(deps, ctx);
      throw unsupported("GetTaskPushNotificationConfig");
    },
    async listTaskPushNotificationConfigs(_request, ctx) {
      await a2aCallerOf(deps, ctx);
      throw unsupported("ListTaskPushNotificationConfigs");
    },
    async deleteTaskPushNotificationConfig(_request, ctx) {
      await a2aCallerOf(deps, ctx);
      throw unsupported("DeleteTaskPushNotificationConfig");
    },
    async getExtendedAgentCard(_request, ctx) {
      await a2aCallerOf(deps, ctx);
      throw a2aError("ExtendedAgentCardNotConfigured", "this agent has no extended agent card");
    },
  };
}
