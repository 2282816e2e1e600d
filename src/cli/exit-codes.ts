// The exit status of a command that shows a task, by the state it shows; the
// same for Synapse and A2A agents.
import { TaskState } from "../../gen/synapse/v1/payloads_pb.js";
import { isTerminal } from "../protocol/state-machine.js";

/** States in which a task waits for its requester: information or a human decision. */
const WAITING_FOR_YOU = new Set([TaskState.INFO_NEEDED, TaskState.NEED_HUMAN, TaskState.HUMAN_DECIDING]);

/**
 * The exit status of a command that shows a task, by the state it shows:
 * 0 completed or still under way, 1 failed, rejected or cancelled (a human's
 * rejection included: the task fails next), 3 waiting for its requester.
 * (`cancel` is the one exception: a task it cancelled is what was asked for, 0.)
 */
export function exitCodeFor(state: TaskState | undefined): number {
  if (state === undefined) return 0;
  if (WAITING_FOR_YOU.has(state)) return 3;
  if (state === TaskState.HUMAN_REJECTED) return 1;
  if (!isTerminal(state)) return 0;
  return state === TaskState.COMPLETED ? 0 : 1;
}
