// A Synapse task as A2A shows it: its state, the agent's message saying what
// it waits for, its result as an artifact, and its history rebuilt from the
// event log (the requester's messages and the agent's questions and last
// word). docs/A2A.md describes every shape built here.
import { create, fromJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import {
  ArtifactSchema,
  MessageSchema,
  PartSchema,
  Role,
  TaskSchema,
  TaskStatusSchema,
  type Artifact,
  type Message,
  type Part,
  type Task,
  type TaskStatus,
} from "../../gen/lf/a2a/v1/a2a_pb.js";
import { MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import {
  TaskRequestPayloadSchema,
  TaskState,
  type TaskAckPayload,
  type TaskCompletePayload,
  type TaskFailedPayload,
  type TaskNeedHumanPayload,
  type TaskNeedInfoPayload,
  type TaskRejectPayload,
} from "../../gen/synapse/v1/payloads_pb.js";
import { fromValue, toValue } from "../protocol/json-values.js";
import type { StoredEvent, TaskAnswer, TaskRecord } from "../store/store.js";
import { RESULT_ARTIFACTS_KEY, RESULT_DIRECT_REPLY_KEY } from "../agent/handler.js";
import { a2aMessageIdOf } from "./ids.js";
import { a2aState } from "./states.js";

/** Where a task records the A2A message that created it (TaskRequestPayload.context.metadata). */
export const A2A_METADATA_KEY = "a2a";

/** Result streams up to this size are inlined in the artifact as a raw part. */
export const INLINE_RESULT_BYTES = 1024 * 1024;

export interface TaskShape {
  /** Messages of history to include: undefined all, 0 none, n the last n. */
  historyLength?: number;
  /** Include the result artifact (default true). */
  includeArtifacts?: boolean;
}

/** What the converter needs besides the task: the task type's input schema, for the missing fields' schemas. */
export interface ConvertContext {
  inputSchemaOf(taskType: string): JsonObject | undefined;
}

export const textPart = (value: string): Part => create(PartSchema, { content: { case: "text", value } });
export const dataPart = (value: JsonValue): Part => create(PartSchema, { content: { case: "data", value: toValue(value) }, mediaType: "application/json" });

/** A message of the agent about a task. */
export function agentMessage(task: TaskRecord, messageId: string, parts: Part[]): Message {
  return create(MessageSchema, { messageId, contextId: task.carried?.sessionId ?? "", taskId: task.taskId, role: Role.AGENT, parts });
}

/** The agent's question for missing information: the question as text, the fields and their schema as data. */
export function needInfoMessage(task: TaskRecord, need: TaskNeedInfoPayload, messageId: string, context: ConvertContext): Message {
  const inputSchema = context.inputSchemaOf(task.taskType);
  const properties = (inputSchema?.properties ?? {}) as JsonObject;
  const fields = need.missingFields.map((field) => field.field);
  const schema: JsonObject = { type: "object", properties: Object.fromEntries(fields.map((field) => [field, properties[field] ?? {}])), required: fields };
  const missingFields = need.missingFields.map((field) => {
    const entry: JsonObject = { field: field.field, reason: field.reason };
    const suggested = fromValue(field.suggestedValue);
    if (suggested !== undefined) entry.suggestedValue = suggested;
    if (field.alternatives.length > 0) entry.alternatives = field.alternatives.map((value) => fromValue(value) ?? null);
    return entry;
  });
  const question = need.question || `please provide ${fields.join(", ")}`;
  return agentMessage(task, messageId, [textPart(question), dataPart({ kind: "need_info", missingFields, schema })]);
}

/** The human question: what is to be decided as text, the decision's id, options and answer shape as data. */
export function needHumanMessage(task: TaskRecord, need: TaskNeedHumanPayload, messageId: string): Message {
  const reason = need.reason?.message || "a human decision is needed";
  const summary = need.context?.taskSummary ? ` (${need.context.taskSummary})` : "";
  const options = need.options.map((option) => ({ field: option.field, value: fromValue(option.value) ?? null, prosCons: option.prosCons, confidence: option.confidence }));
  return agentMessage(task, messageId, [
    textPart(`${reason}${summary}. Answer approve, modify or reject.`),
    dataPart({ kind: "need_human", decisionId: need.decisionId, code: need.reason?.code ?? "", options, answer: { decision: "approve | modify | reject", fields: {}, reason: "" } }),
  ]);
}

/** The artifacts a handler returned (ResultArtifact), from the signed result's metadata. */
function declaredArtifacts(task: TaskRecord): Artifact[] {
  const declared = task.result?.metadata?.[RESULT_ARTIFACTS_KEY];
  if (!Array.isArray(declared)) return [];
  const artifacts: Artifact[] = [];
  for (const entry of declared) {
    try {
      artifacts.push(fromJson(ArtifactSchema, entry, { ignoreUnknownFields: true }));
    } catch {
      // a metadata entry of another shape (a Synapse requester's own "artifacts"): not an A2A artifact
    }
  }
  return artifacts;
}

/**
 * A completed task's artifacts: those its handler returned, then the one
 * holding its JSON output and result stream (when it has either).
 */
export function resultArtifacts(task: TaskRecord, streamBytes?: Uint8Array): Artifact[] {
  const result = task.result;
  if (result === undefined) return [];
  const artifacts = declaredArtifacts(task);
  const parts: Part[] = [];
  const output = fromValue(result.output);
  if (output !== undefined) parts.push(dataPart(output));
  const stream = task.resultStream;
  if (stream !== undefined) {
    if (streamBytes !== undefined) {
      parts.push(create(PartSchema, { content: { case: "raw", value: streamBytes }, filename: "result", mediaType: stream.contentType || "application/octet-stream" }));
    } else {
      // Too large to inline: how to read it over Synapse (P2PService.ReadResult, by task id).
      parts.push(dataPart({ kind: "result_stream", taskId: task.taskId, contentType: stream.contentType, totalSize: stream.totalSize, readWith: "synapse.v1.P2PService/ReadResult" }));
    }
  }
  if (parts.length > 0 || artifacts.length === 0) {
    artifacts.push(create(ArtifactSchema, { artifactId: `${task.taskId}-result`, name: "result", description: result.outputType ? `${task.taskType} result (${result.outputType})` : `${task.taskType} result`, parts }));
  }
  return artifacts;
}

/**
 * A completed task whose handler gave a direct reply (TaskOutput.directReply),
 * as the A2A Message a waiting SendMessage answers with: the summary as
 * text, then its artifacts' parts. Undefined for any other task.
 */
export function directReplyMessage(task: TaskRecord): Message | undefined {
  if (task.state !== TaskState.COMPLETED || task.result?.metadata?.[RESULT_DIRECT_REPLY_KEY] !== true) return undefined;
  // A completed task's status message is its summary ("completed" when it gave none).
  const summary = task.statusMessage;
  const parts = [...(summary === "" ? [] : [textPart(summary)]), ...resultArtifacts(task).flatMap((artifact) => artifact.parts)];
  return agentMessage(task, `${task.taskId}-reply`, parts.length > 0 ? parts : [textPart("done")]);
}

/** The agent's message for the task's current state: its question, its failure, or its last word. */
export function statusMessage(task: TaskRecord, context: ConvertContext): Message | undefined {
  const id = `${task.taskId}-${task.lastSequence}`;
  if (task.state === TaskState.INFO_NEEDED && task.pendingInfo) return needInfoMessage(task, task.pendingInfo, id, context);
  if ((task.state === TaskState.NEED_HUMAN || task.state === TaskState.HUMAN_DECIDING) && task.pendingDecision) return needHumanMessage(task, task.pendingDecision, id);
  if (task.state === TaskState.FAILED && task.error) return agentMessage(task, id, [textPart(task.error.message || "the task failed"), dataPart({ kind: "error", code: task.error.code, message: task.error.message })]);
  if (task.state === TaskState.REJECTED && task.rejection) return agentMessage(task, id, [textPart(task.rejection.reason?.message || "the task was rejected")]);
  if (task.state === TaskState.CANCELLED) return agentMessage(task, id, [textPart(task.statusMessage || "cancelled")]);
  return undefined;
}

export function taskStatus(task: TaskRecord, context: ConvertContext): TaskStatus {
  return create(TaskStatusSchema, { state: a2aState(task.state), message: statusMessage(task, context), timestamp: timestampFromMs(task.updatedAtMs) });
}

/** The A2A message that created the task, when it came over A2A. */
export function requestMessage(task: TaskRecord): Message {
  const recorded = (task.request.context?.metadata?.[A2A_METADATA_KEY] as JsonObject | undefined)?.message;
  if (recorded !== undefined && recorded !== null && typeof recorded === "object") {
    try {
      return fromJson(MessageSchema, recorded, { ignoreUnknownFields: true });
    } catch {
      // fall through: show the request as the task's input
    }
  }
  return create(MessageSchema, { messageId: task.requestMessageId, contextId: task.carried?.sessionId ?? "", taskId: task.taskId, role: Role.USER, parts: [dataPart(task.request.task?.payload ?? {})] });
}

function answerMessage(task: TaskRecord, ack: TaskAckPayload, answer: TaskAnswer | undefined): Message {
  let parts: Part[];
  if (ack.acknowledgedType === MessageType.HUMAN_DECISION) {
    if (ack.state === TaskState.HUMAN_REJECTED) parts = [dataPart({ decision: "reject", reason: ack.message })];
    else parts = [dataPart({ decision: answer?.kind === "decision" ? answer.action : "approve", fields: answer?.fields ?? {} })];
  } else parts = [dataPart(answer?.fields ?? {})];
  return create(MessageSchema, { messageId: a2aMessageIdOf(ack.acknowledgedMessageId), contextId: task.carried?.sessionId ?? "", taskId: task.taskId, role: Role.USER, parts });
}

/** The conversation the event log records: the request, questions and answers, and the agent's last word. */
export function taskHistory(task: TaskRecord, events: readonly StoredEvent[], context: ConvertContext): Message[] {
  const history: Message[] = [requestMessage(task)];
  const infos = task.answers.filter((answer) => answer.kind === "info");
  const decisions = task.answers.filter((answer) => answer.kind === "decision");
  for (const event of events) {
    const id = `${task.taskId}-${event.sequence}`;
    switch (event.header.messageType) {
      case MessageType.TASK_NEED_INFO:
        history.push(needInfoMessage(task, event.payload as TaskNeedInfoPayload, id, context));
        break;
      case MessageType.TASK_NEED_HUMAN:
        history.push(needHumanMessage(task, event.payload as TaskNeedHumanPayload, id));
        break;
      case MessageType.TASK_ACK: {
        const ack = event.payload as TaskAckPayload;
        if (ack.acknowledgedType === MessageType.TASK_INFO_PROVIDED) history.push(answerMessage(task, ack, infos.shift()));
        else if (ack.acknowledgedType === MessageType.HUMAN_DECISION) history.push(answerMessage(task, ack, ack.state === TaskState.HUMAN_REJECTED ? undefined : decisions.shift()));
        break;
      }
      case MessageType.TASK_COMPLETE: {
        const summary = (event.payload as TaskCompletePayload).summary;
        history.push(agentMessage(task, id, [textPart(summary || "completed")]));
        break;
      }
      case MessageType.TASK_FAILED:
        history.push(agentMessage(task, id, [textPart((event.payload as TaskFailedPayload).error?.message || "failed")]));
        break;
      case MessageType.TASK_REJECT:
        history.push(agentMessage(task, id, [textPart((event.payload as TaskRejectPayload).reason?.message || "rejected")]));
        break;
      default:
        break; // confirmations and progress are states, not messages
    }
  }
  return history;
}

/** The A2A Task for a Synapse task. `events`: its event log, needed when history is shown. */
/** A confidential task as A2A sees it: its id, type, parties and state, none of its content. */
export function withoutContent(task: TaskRecord): TaskRecord {
  return {
    ...task,
    statusMessage: "",
    request: create(TaskRequestPayloadSchema, { task: { id: task.taskId, type: task.taskType } }),
    payload: {},
    pendingInfo: undefined,
    pendingDecision: undefined,
    result: undefined,
    error: undefined,
    rejection: undefined,
    answers: [],
  };
}

export function a2aTask(task: TaskRecord, context: ConvertContext, shape: TaskShape = {}, events: readonly StoredEvent[] = [], streamBytes?: Uint8Array): Task {
  const historyLength = shape.historyLength;
  let history: Message[] = [];
  if (historyLength === undefined || historyLength > 0) {
    history = taskHistory(task, events, context);
    if (historyLength !== undefined) history = history.slice(-historyLength);
  }
  const artifacts = shape.includeArtifacts === false ? [] : resultArtifacts(task, streamBytes);
  return create(TaskSchema, {
    id: task.taskId,
    contextId: task.carried?.sessionId ?? "",
    status: taskStatus(task, context),
    artifacts,
    history,
    metadata: { synapse: { taskType: task.taskType, state: `TASK_STATE_${TaskState[task.state]}`, progress: task.progress, lastSequence: task.lastSequence } },
  });
}
