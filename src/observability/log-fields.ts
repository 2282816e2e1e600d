// The fields every log line about a message carries, with one spelling
// everywhere: trace_id, message_id, message_type, task_id, sender,
// receiver and state (the task's state after the message). Span attributes
// name the same things (spans.ts ATTR).
import { MessageType, type Header } from "../../gen/synapse/v1/envelope_pb.js";
import { TaskState, type TaskAckPayload } from "../../gen/synapse/v1/payloads_pb.js";
import { wireName } from "../protocol/message-types.js";
import { stateName } from "../protocol/state-machine.js";
import type { CarriedIds, StoredEvent } from "../store/store.js";
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

/** The state an executor's event puts its task in; a task_ack names it in its payload. */
const EVENT_STATES = new Map<MessageType, TaskState>([
  [MessageType.TASK_CONFIRM, TaskState.CONFIRMED],
  [MessageType.TASK_REJECT, TaskState.REJECTED],
  [MessageType.TASK_STATUS_UPDATE, TaskState.EXECUTING],
  [MessageType.TASK_NEED_INFO, TaskState.INFO_NEEDED],
  [MessageType.TASK_NEED_HUMAN, TaskState.NEED_HUMAN],
  [MessageType.TASK_COMPLETE, TaskState.COMPLETED],
  [MessageType.TASK_FAILED, TaskState.FAILED],
]);

/** The fields of a log line about one event of a task, with the state it put the task in. */
export function eventLogFields(event: Pick<StoredEvent, "header" | "payload">): MessageLogFields {
  const type = event.header.messageType;
  const state = type === MessageType.TASK_ACK ? (event.payload as TaskAckPayload).state : EVENT_STATES.get(type);
  return messageLogFields(event.header, state === TaskState.UNSPECIFIED ? undefined : state);
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
