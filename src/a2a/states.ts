// Synapse's task states onto A2A's TaskState, and back (for ListTasks'
// status filter). docs/A2A.md has the table. AUTH_REQUIRED is never
// produced: a Synapse task waits only for information or a human.
import { TaskState as A2AState } from "../../gen/lf/a2a/v1/a2a_pb.js";
import { TaskState } from "../../gen/synapse/v1/payloads_pb.js";

const toA2A: Record<TaskState, A2AState> = {
  [TaskState.UNSPECIFIED]: A2AState.UNSPECIFIED,
  [TaskState.IDLE]: A2AState.SUBMITTED,
  [TaskState.PENDING]: A2AState.SUBMITTED,
  [TaskState.CONFIRMED]: A2AState.SUBMITTED,
  [TaskState.EXECUTING]: A2AState.WORKING,
  [TaskState.INFO_NEEDED]: A2AState.INPUT_REQUIRED,
  [TaskState.INFO_PROVIDED]: A2AState.WORKING,
  [TaskState.NEED_HUMAN]: A2AState.INPUT_REQUIRED,
  [TaskState.HUMAN_DECIDING]: A2AState.INPUT_REQUIRED,
  [TaskState.HUMAN_APPROVED]: A2AState.WORKING,
  // Passing: a human rejection fails the task in the next commit.
  [TaskState.HUMAN_REJECTED]: A2AState.WORKING,
  [TaskState.COMPLETED]: A2AState.COMPLETED,
  [TaskState.FAILED]: A2AState.FAILED,
  [TaskState.CANCELLED]: A2AState.CANCELED,
  [TaskState.REJECTED]: A2AState.REJECTED,
};

/** The A2A state a Synapse state shows as. */
export function a2aState(state: TaskState): A2AState {
  return toA2A[state] ?? A2AState.UNSPECIFIED;
}

/** The Synapse states an A2A state stands for (empty for AUTH_REQUIRED: no task is ever in it). */
export function synapseStates(state: A2AState): TaskState[] {
  return (Object.keys(toA2A) as unknown as string[])
    .map(Number)
    .filter((synapse) => synapse !== TaskState.UNSPECIFIED && toA2A[synapse as TaskState] === state) as TaskState[];
}

/** Whether an A2A state ends the task (no more events will come). */
export function isA2ATerminal(state: A2AState): boolean {
  return state === A2AState.COMPLETED || state === A2AState.FAILED || state === A2AState.CANCELED || state === A2AState.REJECTED;
}

/** Whether an A2A stream ends at this state: the task ended, or waits for the client (input or auth). */
export function endsStream(state: A2AState): boolean {
  return isA2ATerminal(state) || state === A2AState.INPUT_REQUIRED || state === A2AState.AUTH_REQUIRED;
}
