// What a recorded task event does to its task's state. Executor events move
// the state by their own type; a task_ack records the requester message it
// acknowledges, and the state that message led to. Requesters replay a
// task's event log with this to check every step against the state machine.
import type { Message } from "@bufbuild/protobuf";
import { MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import { DecisionAction, TaskState, type TaskAckPayload } from "../../gen/synapse/v1/payloads_pb.js";
import { transition } from "./state-machine.js";

/** The state after `type` (with `payload`) from `previous`, or undefined when the step is illegal. */
export function stateAfterEvent(previous: TaskState, type: MessageType, payload: Message): TaskState | undefined {
  if (type !== MessageType.TASK_ACK) {
    const step = transition(previous, type);
    return step.allowed ? step.next : undefined;
  }
  const ack = payload as TaskAckPayload;
  if (ack.acknowledgedType === MessageType.HUMAN_DECISION) {
    const action = ack.state === TaskState.HUMAN_REJECTED ? DecisionAction.REJECT : DecisionAction.APPROVE;
    const step = transition(previous, MessageType.HUMAN_DECISION, action);
    return step.allowed && step.next === ack.state ? step.next : undefined;
  }
  const step = transition(previous, ack.acknowledgedType);
  return step.allowed && step.next === ack.state ? step.next : undefined;
}
