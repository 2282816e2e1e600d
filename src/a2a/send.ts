// SendMessage on the engine: a new message becomes a task at the engine's
// intake; a message on a task that waits answers it through steering (the
// information asked for, or a human decision); CancelTask is a cancel. Each
// goes in as an unsigned message from the authenticated caller, with the
// engine's checks: once per message id, the concurrency limit, only the
// task's requester steers it.
import { create, toBinary, toJson, type JsonObject } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { createHash, randomUUID } from "node:crypto";
import { MessageSchema, Role, SendMessageRequestSchema, type Message, type SendMessageRequest } from "../../gen/lf/a2a/v1/a2a_pb.js";
import { HeaderSchema, MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import {
  DecisionAction,
  HumanDecisionPayloadSchema,
  TaskCancelPayloadSchema,
  TaskInfoProvidedPayloadSchema,
  TaskRequestPayloadSchema,
  TaskState,
} from "../../gen/synapse/v1/payloads_pb.js";
import type { Agent } from "../agent/agent.js";
import type { UnsignedMessage } from "../agent/engine.js";
import type { TaskSchemas } from "../agent/schemas.js";
import { PROTOCOL_VERSION } from "../envelope/seal.js";
import { isTerminal, stateName } from "../protocol/state-machine.js";
import type { TaskRecord } from "../store/store.js";
import type { A2ACaller } from "./auth.js";
import { A2A_METADATA_KEY } from "./convert.js";
import { a2aError } from "./errors.js";
import { scopedMessageId } from "./ids.js";
import { decisionOf, messageInput, providedFields, taskTypeOf } from "./input.js";
import { inA2ATerms } from "./synapse-errors.js";

/** How long a message id is remembered: the same id again within it gets the same task. */
export const MESSAGE_ID_MEMORY_MS = 24 * 60 * 60 * 1000;

export interface SendContext {
  agent: Agent;
  schemas: TaskSchemas;
  defaultSkill?: string;
}

/** The reader's view of the caller (an operator reads every task). */
export const readerOf = (caller: A2ACaller) => ({ agentId: caller.agentId, operator: caller.operator });

/** The caller's task, or A2A's TaskNotFound (for no task and for another caller's alike). */
export function callerTask(agent: Agent, taskId: string, caller: A2ACaller): Promise<TaskRecord> {
  return inA2ATerms(() => agent.reader.getTask(taskId, readerOf(caller)));
}

function checkMessage(request: SendMessageRequest): Message {
  const message = request.message;
  if (message === undefined) throw a2aError("InvalidParams", "message is required", { fieldViolations: [{ field: "message", description: "required" }] });
  if (message.messageId === "") throw a2aError("InvalidParams", "message.messageId is required", { fieldViolations: [{ field: "message.messageId", description: "required" }] });
  if (message.role === Role.AGENT) throw a2aError("InvalidParams", "message.role must be ROLE_USER", { fieldViolations: [{ field: "message.role", description: "ROLE_USER" }] });
  if (message.parts.length === 0) throw a2aError("InvalidParams", "message.parts must hold at least one part", { fieldViolations: [{ field: "message.parts", description: "at least one part is required" }] });
  return message;
}

/** What identifies a message's content: the same id with other content is a replay. */
function digestOf(request: SendMessageRequest): string {
  const bytes = toBinary(SendMessageRequestSchema, create(SendMessageRequestSchema, { message: request.message, metadata: request.metadata }));
  return createHash("sha256").update(bytes).digest("hex");
}

function headerFor(agent: Agent, caller: A2ACaller, type: MessageType, messageId: string, taskId: string, sessionId: string) {
  const now = Date.now();
  return create(HeaderSchema, {
    messageId,
    messageType: type,
    protocolVersion: PROTOCOL_VERSION,
    sender: { agentId: caller.agentId, systemId: "", keyId: caller.keyId },
    receiver: { agentId: agent.identity.agentId, systemId: agent.identity.systemId, keyId: agent.identity.key.keyId },
    sentAt: timestampFromMs(now),
    expiresAt: timestampFromMs(now + MESSAGE_ID_MEMORY_MS),
    taskId,
    sessionId,
  });
}

/** Takes a SendMessage: the task it created or answered, as the engine left it. */
export async function acceptMessage(context: SendContext, caller: A2ACaller, request: SendMessageRequest): Promise<TaskRecord> {
  const message = checkMessage(request);
  const { agent } = context;
  const messageId = scopedMessageId(caller.agentId, message.messageId);
  const digest = digestOf(request);
  if (message.taskId !== "") return answerTask(context, caller, message, messageId, digest);
  const taskTypes = agent.provider.getCapabilities().supportedTaskTypes.map((entry) => entry.type);
  const taskType = taskTypeOf(request, taskTypes, context.defaultSkill);
  const input = messageInput(message);
  const check = context.schemas.checkInput(taskType, input);
  if (!check.valid) {
    const problems = check.problems.slice(0, 32);
    throw a2aError("InvalidParams", `the message does not make a valid ${taskType} input: ${problems.map((problem) => problem.message).join("; ")}`, {
      fieldViolations: problems.map((problem) => ({ field: problem.missingProperty ?? (problem.path.replace(/^\//, "").replaceAll("/", ".") || "message.parts"), description: problem.message })),
    });
  }
  const taskId = randomUUID();
  const contextId = message.contextId || randomUUID();
  // The A2A message is kept on the task (its history's first entry), with the ids it was given.
  const recorded = toJson(MessageSchema, create(MessageSchema, { ...message, taskId, contextId })) as JsonObject;
  const payload = create(TaskRequestPayloadSchema, {
    task: { id: taskId, type: taskType, payload: input },
    context: { sessionId: contextId, metadata: { [A2A_METADATA_KEY]: { message: recorded, caller: caller.agentId, signed: false } } },
  });
  const unsigned: UnsignedMessage = { header: headerFor(agent, caller, MessageType.TASK_REQUEST, messageId, taskId, contextId), payload, digest };
  const outcome = await inA2ATerms(() => agent.engine.receiveUnsigned(unsigned));
  if (outcome.task === undefined) throw a2aError("Internal", "the engine made no task of the message");
  return outcome.task;
}

/** A message on an existing task: the information or the decision the task waits for. */
async function answerTask(context: SendContext, caller: A2ACaller, message: Message, messageId: string, digest: string): Promise<TaskRecord> {
  const { agent } = context;
  // Sent again: the first answer's task, without asking the state machine twice.
  const seen = await agent.store.getMessage("a2a", messageId);
  if (seen !== undefined && seen.senderAgentId === caller.agentId && seen.digest === digest && seen.taskId === message.taskId) return callerTask(agent, message.taskId, caller);
  const task = await callerTask(agent, message.taskId, caller);
  const contextId = task.carried?.sessionId ?? "";
  if (message.contextId !== "" && message.contextId !== contextId) {
    throw a2aError("InvalidParams", `message.contextId ${message.contextId} is not the context of task ${task.taskId}`, { fieldViolations: [{ field: "message.contextId", description: `the task's context is ${contextId}` }] });
  }
  if (isTerminal(task.state)) throw a2aError("UnsupportedOperation", `task ${task.taskId} is ${stateName(task.state)}: a task that ended takes no more messages`, { metadata: { taskId: task.taskId } });
  const header = (type: MessageType) => headerFor(agent, caller, type, messageId, task.taskId, contextId);
  let unsigned: UnsignedMessage;
  if (task.state === TaskState.INFO_NEEDED) {
    const fields = providedFields(message, task.pendingInfo);
    unsigned = { header: header(MessageType.TASK_INFO_PROVIDED), payload: create(TaskInfoProvidedPayloadSchema, { taskId: task.taskId, fields, note: "" }), digest };
  } else if (task.state === TaskState.NEED_HUMAN || task.state === TaskState.HUMAN_DECIDING) {
    const answer = decisionOf(message);
    const action = answer.action === "reject" ? DecisionAction.REJECT : answer.action === "modify" ? DecisionAction.MODIFY : DecisionAction.APPROVE;
    const decision =
      answer.action === "reject"
        ? { action, rejectionReason: answer.reason }
        : answer.action === "modify"
          ? { action, modifiedFields: answer.fields }
          : { action, approvedFields: answer.fields };
    const payload = create(HumanDecisionPayloadSchema, {
      taskId: task.taskId,
      decisionId: task.pendingDecision?.decisionId ?? "",
      decidedBy: { userId: caller.agentId, userName: "", role: "a2a" },
      decision,
      notes: answer.notes,
      timestamp: timestampFromMs(Date.now()),
    });
    unsigned = { header: header(MessageType.HUMAN_DECISION), payload, digest };
  } else {
    throw a2aError("UnsupportedOperation", `task ${task.taskId} is ${stateName(task.state)} and waits for no input`, { metadata: { taskId: task.taskId } });
  }
  const outcome = await inA2ATerms(() => agent.engine.receiveUnsigned(unsigned));
  return outcome.task ?? (await callerTask(agent, task.taskId, caller));
}

/** CancelTask: the engine's cancel, by the task's requester; a task past cancelling is TaskNotCancelable. */
export async function cancelTask(agent: Agent, caller: A2ACaller, taskId: string): Promise<TaskRecord> {
  const task = await callerTask(agent, taskId, caller);
  if (isTerminal(task.state)) throw a2aError("TaskNotCancelable", `task ${taskId} is ${stateName(task.state)}`, { metadata: { taskId } });
  const header = headerFor(agent, caller, MessageType.TASK_CANCEL, scopedMessageId(caller.agentId, `cancel-${randomUUID()}`), taskId, task.carried?.sessionId ?? "");
  const unsigned: UnsignedMessage = { header, payload: create(TaskCancelPayloadSchema, { taskId, reason: "canceled by the requester (A2A CancelTask)" }), digest: randomUUID() };
  const outcome = await inA2ATerms(() => agent.engine.receiveUnsigned(unsigned), {
    [ErrorCode.TASK_ALREADY_COMPLETED]: "TaskNotCancelable",
    [ErrorCode.ILLEGAL_TRANSITION]: "TaskNotCancelable",
    [ErrorCode.PERMISSION_DENIED]: "TaskNotFound",
  });
  return outcome.task ?? (await callerTask(agent, taskId, caller));
}
