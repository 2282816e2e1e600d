// GroupTaskHandler's strategies (docs/PROTOCOL.md §7.5) as one pure step:
// given a group task's sub-tasks so far, which slots to assign to which
// member next, and whether the group task is over. Broadcast and quorum
// give every assigned member one slot; shard deals shards to free members
// one at a time and retries a failed shard on another member.
import { GroupTaskStrategy, type GroupTaskSubmitPayload } from "../../gen/synapse/v1/a2n_pb.js";
import { TaskState } from "../../gen/synapse/v1/payloads_pb.js";
import type { GroupTask, Subtask } from "../../gen/synapse/v1/group_pb.js";

export interface Assignment {
  slot: number;
  agentId: string;
  attempt: number;
}

export type Verdict =
  | { kind: "continue" }
  | { kind: "completed" }
  /** The goal can no longer be reached; `cancelRunning` when the rest would be wasted. */
  | { kind: "failed"; reason: string; cancelRunning: boolean };

export interface Step {
  assign: Assignment[];
  verdict: Verdict;
}

export const submitTerms = (task: GroupTask): GroupTaskSubmitPayload => task.request!.view!.payload!.body.value as GroupTaskSubmitPayload;

export const completedOk = (subtask: Subtask) => subtask.finished && subtask.state === TaskState.COMPLETED;
const running = (subtask: Subtask) => !subtask.finished;

/** How many slots a group task has: one per assigned member, or one per shard. */
export function slotCount(task: GroupTask): number {
  return task.strategy === GroupTaskStrategy.SHARD ? submitTerms(task).shards.length : task.assigned.length;
}

/** Why a sub-task did not complete, for a person. */
export function failureOf(subtask: Subtask): string {
  if (subtask.lostReason !== "") return subtask.lostReason;
  const body = subtask.outcome?.view?.payload?.body;
  if (body?.case === "taskFailed") return body.value.error?.message || "failed";
  if (body?.case === "taskReject") return `rejected: ${body.value.reason?.message || "no reason"}`;
  return TaskState[subtask.state]?.toLowerCase() ?? "unknown";
}

function describeFailures(subtasks: readonly Subtask[]): string {
  const failed = subtasks.filter((subtask) => subtask.finished && !completedOk(subtask));
  return failed.map((subtask) => `${subtask.ref!.agentId} (slot ${subtask.ref!.slot}): ${failureOf(subtask)}`).join("; ");
}

export function nextStep(task: GroupTask): Step {
  const slots = slotCount(task);
  const subtasks = task.subtasks;
  const bySlot = Array.from({ length: slots }, (_, slot) => subtasks.filter((subtask) => subtask.ref!.slot === slot));
  const done = bySlot.filter((list) => list.some(completedOk)).length;
  const live = subtasks.filter(running).length;
  const assign: Assignment[] = [];

  if (task.strategy !== GroupTaskStrategy.SHARD) {
    if (subtasks.length === 0) task.assigned.forEach((agentId, slot) => assign.push({ slot, agentId, attempt: 1 }));
    const pending = assign.length;
    if (task.strategy === GroupTaskStrategy.QUORUM) {
      if (done >= task.required) return { assign: [], verdict: { kind: "completed" } };
      if (done + live + pending < task.required) {
        return { assign: [], verdict: { kind: "failed", reason: `only ${done} of the ${task.required} needed can complete: ${describeFailures(subtasks)}`, cancelRunning: true } };
      }
      return { assign, verdict: { kind: "continue" } };
    }
    if (done === slots) return { assign: [], verdict: { kind: "completed" } };
    if (live + pending === 0) return { assign: [], verdict: { kind: "failed", reason: `${slots - done} of ${slots} members did not complete: ${describeFailures(subtasks)}`, cancelRunning: false } };
    return { assign, verdict: { kind: "continue" } };
  }

  if (done === slots) return { assign: [], verdict: { kind: "completed" } };
  const maxAttempts = submitTerms(task).maxAttempts || Math.min(3, task.assigned.length);
  // A member that failed or lost a shard of this group task gets no more of them.
  const bad = new Set(subtasks.filter((subtask) => subtask.finished && !completedOk(subtask)).map((subtask) => subtask.ref!.agentId));
  const busy = new Set(subtasks.filter(running).map((subtask) => subtask.ref!.agentId));
  let dead = "";
  for (let slot = 0; slot < slots && dead === ""; slot++) {
    const list = bySlot[slot]!;
    if (list.some(completedOk) || list.some(running)) continue;
    const tried = new Set(list.map((subtask) => subtask.ref!.agentId));
    const candidates = task.assigned.filter((agentId) => !bad.has(agentId) && !tried.has(agentId));
    if (list.length >= maxAttempts || candidates.length === 0) {
      dead = `shard ${slot} failed ${list.length} time(s): ${describeFailures(list)}`;
      break;
    }
    const free = candidates.find((agentId) => !busy.has(agentId));
    if (free === undefined) continue;
    busy.add(free);
    assign.push({ slot, agentId: free, attempt: list.length + 1 });
  }
  if (dead !== "") {
    // No new shard starts; the running ones finish, for the partial result.
    return { assign: [], verdict: live === 0 ? { kind: "failed", reason: dead, cancelRunning: false } : { kind: "continue" } };
  }
  return { assign, verdict: { kind: "continue" } };
}
