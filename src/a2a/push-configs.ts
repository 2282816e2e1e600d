// The four push-notification-config RPCs: a task's webhooks, kept in the
// store, each checked against the outbound address policy when created,
// readable and removable only by the task's caller.
import { create } from "@bufbuild/protobuf";
import { randomUUID } from "node:crypto";
import {
  ListTaskPushNotificationConfigsResponseSchema,
  TaskPushNotificationConfigSchema,
  type ListTaskPushNotificationConfigsResponse,
  type TaskPushNotificationConfig,
} from "../../gen/lf/a2a/v1/a2a_pb.js";
import type { Agent } from "../agent/agent.js";
import { clip } from "../protocol/errors.js";
import { isTerminal } from "../protocol/state-machine.js";
import { PushConfigLimitError, type A2APushStore, type PushConfigRecord } from "../store/a2a-push.js";
import type { A2ACaller } from "./auth.js";
import { a2aError } from "./errors.js";
import type { A2APushSender } from "./push.js";
import { callerTask } from "./send.js";

export interface PushContext {
  agent: Agent;
  store: A2APushStore;
  sender: A2APushSender;
}

const MAX_CONFIG_ID_CHARS = 128;

/** The config as A2A shows it: its token, but never its credentials. */
function configView(record: PushConfigRecord): TaskPushNotificationConfig {
  return create(TaskPushNotificationConfigSchema, {
    id: record.configId,
    taskId: record.taskId,
    url: record.url,
    token: record.token,
    authentication: record.authScheme ? { scheme: record.authScheme, credentials: "" } : undefined,
  });
}

const noConfig = (taskId: string, id: string) => a2aError("TaskNotFound", `task ${clip(taskId)} has no push notification config ${clip(id)}`, { metadata: { taskId, configId: id } });

/**
 * Keeps a webhook for a task. `fromStart`: owed every update of the task
 * (a config sent with the SendMessage that made it); otherwise only updates
 * after now.
 */
export async function createPushConfig(context: PushContext, caller: A2ACaller, request: TaskPushNotificationConfig, fromStart = false): Promise<TaskPushNotificationConfig> {
  const task = await callerTask(context.agent, request.taskId, caller);
  if (request.url === "") throw a2aError("InvalidParams", "url is required", { fieldViolations: [{ field: "url", description: "the webhook's http or https URL" }] });
  const problem = context.agent.outbound.urlProblem(request.url);
  if (problem !== undefined) throw a2aError("InvalidParams", `url ${JSON.stringify(clip(request.url))} ${problem}`, { fieldViolations: [{ field: "url", description: problem }] });
  if (request.id.length > MAX_CONFIG_ID_CHARS) throw a2aError("InvalidParams", `id must be at most ${MAX_CONFIG_ID_CHARS} characters`, { fieldViolations: [{ field: "id", description: "at most 128 characters" }] });
  const ended = isTerminal(task.state);
  const record: PushConfigRecord = {
    taskId: task.taskId,
    configId: request.id || randomUUID(),
    url: request.url,
    token: request.token,
    authScheme: request.authentication?.scheme ?? "",
    authCredentials: request.authentication?.credentials ?? "",
    createdAtMs: Date.now(),
    deliveredSequence: fromStart ? 0 : task.lastSequence,
    attempts: 0,
    nextAttemptAtMs: 0,
    status: ended && !fromStart ? "done" : "active",
    lastError: "",
    // The instance that takes the config delivers it; a replaced config keeps its holder.
    leaseOwner: context.sender.owner,
    leaseUntilMs: context.sender.leaseUntil(),
  };
  let stored: PushConfigRecord;
  try {
    stored = await context.store.putPushConfig(record);
  } catch (error) {
    if (error instanceof PushConfigLimitError) throw a2aError("InvalidParams", error.message, { fieldViolations: [{ field: "taskId", description: error.message }] });
    throw error;
  }
  context.sender.track(stored);
  return configView(stored);
}

export async function getPushConfig(context: PushContext, caller: A2ACaller, taskId: string, id: string): Promise<TaskPushNotificationConfig> {
  await callerTask(context.agent, taskId, caller);
  const record = await context.store.getPushConfig(taskId, id);
  if (record === undefined) throw noConfig(taskId, id);
  return configView(record);
}

/** All of a task's configs on one page (a task keeps at most MAX_PUSH_CONFIGS_PER_TASK). */
export async function listPushConfigs(context: PushContext, caller: A2ACaller, taskId: string, pageSize: number): Promise<ListTaskPushNotificationConfigsResponse> {
  if (pageSize < 0) throw a2aError("InvalidParams", "pageSize must not be negative", { fieldViolations: [{ field: "pageSize", description: "0 or more" }] });
  await callerTask(context.agent, taskId, caller);
  const records = await context.store.listPushConfigs(taskId);
  return create(ListTaskPushNotificationConfigsResponseSchema, { configs: records.map(configView), nextPageToken: "" });
}

/** Deleting is idempotent (spec 3.1.10): a config already gone is deleted again without complaint; the task must still be the caller's. */
export async function deletePushConfig(context: PushContext, caller: A2ACaller, taskId: string, id: string): Promise<void> {
  await callerTask(context.agent, taskId, caller);
  if (await context.store.deletePushConfig(taskId, id)) context.sender.forget(taskId, id);
}
