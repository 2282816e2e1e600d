// The fields every log line about a message carries, with one spelling
// everywhere: trace_id, message_id, message_type, task_id, sender,
// receiver and state (the task's state after the message). Span attributes
// name the same things (spans.ts ATTR).
import type { Header } from "../../gen/synapse/v1/envelope_pb.js";
import type { TaskState } from "../../gen/synapse/v1/payloads_pb.js";
import { wireName } from "../protocol/message-types.js";
import { stateName } from "../protocol/state-machine.js";
import type { CarriedIds } from "../store/store.js";
import { traceIdOf } from "./trace-context.js";

export interface MessageLogFields {
  trace_id?: string;
  message_id: string;
  message_type: string;
  task_id?: string;
  sender?: string;
  receiver?: string;
  state?: string;
  sequence?: number;
}

/** The fields of a log line about the message `header` describes; `state` is its task's state, when known. */
export function messageLogFields(header: Header, state?: TaskState): MessageLogFields {
  const fields: MessageLogFields = {
    trace_id: traceIdOf(header.trace?.traceparent),
    message_id: header.messageId,
    message_type: wireName(header.messageType),
    task_id: header.taskId || undefined,
    sender: header.sender?.agentId,
    receiver: header.receiver?.agentId,
  };
  if (state !== undefined) fields.state = stateName(state);
  if (header.sequence > 0n) fields.sequence = Number(header.sequence);
  return fields;
}

export interface TaskLogFields {
  trace_id?: string;
  task_id: string;
  state?: string;
}

/** The fields of a log line about a task, not one message of it. */
export function taskLogFields(task: { taskId: string; state?: TaskState; carried?: CarriedIds }): TaskLogFields {
  const fields: TaskLogFields = { trace_id: traceIdOf(task.carried?.traceparent), task_id: task.taskId };
  if (task.state !== undefined) fields.state = stateName(task.state);
  return fields;
}
