// How tasks and events look on a terminal and as JSON.
import { toJson, type JsonValue } from "@bufbuild/protobuf";
import { HeaderSchema } from "../../gen/synapse/v1/envelope_pb.js";
import { TaskSchema, type Task } from "../../gen/synapse/v1/p2p_pb.js";
import { TaskState, type TaskAckPayload } from "../../gen/synapse/v1/payloads_pb.js";
import { MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import type { VerifiedMessage } from "../client/requester.js";
import { fromValue } from "../protocol/json-values.js";
import { messageTypeInfo, wireName } from "../protocol/message-types.js";
import { stateName } from "../protocol/state-machine.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import { counted } from "../text/plural.js";

export function taskJson(task: Task): JsonValue {
  return toJson(TaskSchema, task);
}

export function messageJson(message: VerifiedMessage): JsonValue {
  const info = messageTypeInfo(message.type);
  return {
    type: wireName(message.type),
    header: toJson(HeaderSchema, message.header),
    payload: info ? toJson(info.payloadSchema, message.payload as never) : null,
  };
}

/** Who reads the lines: the hints name the agent's URL, and say who may decide. */
export interface Reader {
  /** The agent's base URL, as the user gave it. */
  url: string;
  /** The reader's agent id. */
  agentId: string;
}

/** Who may decide a pending decision: its deciders, or (none named) the requester. */
function deciders(task: Task): string[] {
  const named = task.pendingDecision?.deciders ?? [];
  return named.length > 0 ? [...named] : [task.requester?.agentId ?? "the requester"];
}

/** A few readable lines about a task, with the commands that answer it when the reader may. */
export function describeTask(task: Task, reader: Reader): string[] {
  const lines = [`task ${task.taskId}${task.taskType ? ` (${task.taskType})` : ""}: ${stateName(task.state)}, ${task.progress}%${task.statusMessage ? ` - ${task.statusMessage}` : ""}`];
  if (task.state === TaskState.INFO_NEEDED && task.pendingInfo) {
    lines.push(`needs information: ${task.pendingInfo.question}`);
    for (const field of task.pendingInfo.missingFields) {
      const suggested = fromValue(field.suggestedValue);
      lines.push(`  ${field.field}: ${field.reason}${suggested === undefined ? "" : ` (suggested: ${JSON.stringify(suggested)})`}`);
    }
    lines.push(`answer with: synapse provide-info ${reader.url} ${task.taskId} --set ${task.pendingInfo.missingFields[0]?.field ?? "field"}=VALUE`);
  }
  if ((task.state === TaskState.NEED_HUMAN || task.state === TaskState.HUMAN_DECIDING) && task.pendingDecision) {
    const decision = task.pendingDecision;
    lines.push(`needs a human decision (escalation level ${decision.escalationLevel}): ${decision.reason?.message ?? ""}`);
    for (const option of decision.options) lines.push(`  option ${option.field}=${JSON.stringify(fromValue(option.value))}: ${option.prosCons}`);
    const who = deciders(task);
    const command = `synapse decide ${reader.url} ${task.taskId} --approve | --modify --set KEY=VALUE | --reject [--note TEXT]`;
    if (who.includes(reader.agentId)) lines.push(`decide with: ${command}`);
    else {
      // After an escalation the decision is someone else's: name them, and how they answer.
      lines.push(`decided at this level by: ${who.join(", ")} (not you)`);
      lines.push(`they decide with: ${command} --home THEIR_SYNAPSE_HOME`);
    }
  }
  if (task.result) {
    if (task.result.output) lines.push(`result: ${JSON.stringify(fromValue(task.result.output))}`);
    if (task.result.stream) lines.push(`result stream: ${counted(task.result.stream.totalSize, "byte")} (${task.result.stream.contentType}); read it with ReadResult`);
  }
  // A cancelled task's error (task_cancelled) is the requester's own reason, not a failure.
  if (task.error && task.state === TaskState.CANCELLED) lines.push(`cancelled: ${task.error.message}`);
  else if (task.error) lines.push(`error: ${ErrorCode[task.error.code]?.toLowerCase() ?? task.error.code}: ${task.error.message}`);
  if (task.rejection) lines.push(`rejected: ${ErrorCode[task.rejection.reason?.code ?? 0]?.toLowerCase()}: ${task.rejection.reason?.message ?? ""}`);
  return lines;
}

/** One line about a signed reply, e.g. the task_ack that answers a cancel. */
export function describeReply(message: VerifiedMessage): string {
  const sequence = message.header.sequence > 0n ? ` #${message.header.sequence}` : "";
  if (message.type === MessageType.TASK_ACK) {
    const ack = message.payload as TaskAckPayload;
    return `${wireName(message.type)}${sequence}: task ${ack.taskId} is ${stateName(ack.state)}${ack.message ? ` (${ack.message})` : ""}`;
  }
  return `${wireName(message.type)}${sequence}`;
}

/** One line per event. */
export function describeEvent(sequence: number, message: VerifiedMessage, state: TaskState): string {
  const payload = messageTypeInfo(message.type) ? (toJson(messageTypeInfo(message.type)!.payloadSchema, message.payload as never) as Record<string, JsonValue>) : {};
  const detail = typeof payload.message === "string" ? payload.message : typeof payload.summary === "string" ? payload.summary : "";
  return eventLine(sequence, wireName(message.type), state, typeof payload.progress === "number" ? payload.progress : undefined, detail);
}

/** The line of one event: its sequence, type, the state it leads to, progress and what it says. */
export function eventLine(sequence: number, type: string, state: TaskState, progress: number | undefined, detail: string): string {
  return `#${sequence} ${type} -> ${stateName(state)}${progress === undefined ? "" : ` ${progress}%`}${detail ? ` ${detail}` : ""}`;
}

/** A one-line progress bar for terminals. */
export function progressBar(percent: number, label: string, width = 30): string {
  const filled = Math.round((Math.max(0, Math.min(100, percent)) / 100) * width);
  return `\r[${"#".repeat(filled)}${".".repeat(width - filled)}] ${String(percent).padStart(3)}% ${label}`.padEnd(width + 60);
}
