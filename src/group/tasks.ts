// GroupTaskHandler's records (docs/PROTOCOL.md §7.5): submitting a group
// task, recording what happens to its sub-tasks (the members' signed
// events, or the host giving up on one), answering and cancelling; each
// step applies the strategy (strategy.ts) and returns the events that
// record it and the sub-tasks to send or cancel. Pure functions; the
// runner (fanout.ts) does the calling.
import { clone, create, type JsonObject, type Message } from "@bufbuild/protobuf";
import { durationMs, timestampFromMs, timestampMs } from "@bufbuild/protobuf/wkt";
import {
  GroupDecisionAction,
  GroupEventKind,
  GroupTaskState,
  GroupTaskStrategy,
  SubtaskRefSchema,
  type GroupTaskAnswerPayload,
  type GroupTaskSubmitPayload,
  type SubtaskRef,
} from "../../gen/synapse/v1/a2n_pb.js";
import { MessageType, type Envelope, type Header } from "../../gen/synapse/v1/envelope_pb.js";
import { GroupTaskSchema, MemberOutputSchema, SubtaskSchema, type Group, type GroupTask, type Subtask } from "../../gen/synapse/v1/group_pb.js";
import { TaskState, type TaskCompletePayload, type TaskNeedHumanPayload, type TaskNeedInfoPayload, type TaskStatusUpdatePayload } from "../../gen/synapse/v1/payloads_pb.js";
import type { OpenedEnvelope } from "../envelope/open.js";
import { signedMessage } from "../envelope/view.js";
import { stateAfterEvent } from "../protocol/event-state.js";
import { clip } from "../protocol/errors.js";
import { isTerminal, WAITING_STATES } from "../protocol/state-machine.js";
import { causedBy, type EventDraft } from "./log.js";
import { alreadyExists, checkId, invalidParams, tooMany, LIMITS, memberOf, notFound, refusedNow, requireActive, requireCoordinator, takesPart } from "./rules.js";
import { completedOk, nextStep, submitTerms } from "./strategy.js";

export interface TaskChange {
  task: GroupTask;
  events: EventDraft[];
  /** Sub-tasks newly assigned: to send to their members once committed. */
  send: SubtaskRef[];
  /** Sub-tasks to cancel at their members once committed. */
  cancel: SubtaskRef[];
}

export const isOver = (task: GroupTask) => task.state !== GroupTaskState.RUNNING && task.state !== GroupTaskState.WAITING;
export const subtaskId = (groupTaskId: string, slot: number, attempt: number) => `${groupTaskId}.${slot}.${attempt}`;

/** The input a sub-task gets: the shared payload, and for shard its own fields over it. */
export function subtaskInput(task: GroupTask, slot: number): JsonObject {
  const terms = submitTerms(task);
  const shared = (terms.payload ?? {}) as JsonObject;
  return task.strategy === GroupTaskStrategy.SHARD ? { ...shared, ...((terms.shards[slot] ?? {}) as JsonObject) } : { ...shared };
}

export const memberTimeoutMs = (task: GroupTask) => {
  const timeout = submitTerms(task).memberTimeout;
  return timeout === undefined ? LIMITS.defaultMemberTimeoutMs : durationMs(timeout);
};

/** Group task messages name their group task twice, in the header and the payload: the two must agree. */
export function checkTaskId(header: Header, groupTaskId: string): void {
  if (header.taskId !== groupTaskId) throw invalidParams("header.task_id must equal group_task_id", { field: "group_task_id" });
}

function checkTerms(group: Group, payload: GroupTaskSubmitPayload, header: Header): string[] {
  checkId("group_task_id", payload.groupTaskId);
  checkTaskId(header, payload.groupTaskId);
  if (payload.taskType === "" || payload.taskType.length > LIMITS.nameChars) throw invalidParams("task_type is required", { field: "task_type" });
  if (GroupTaskStrategy[payload.strategy] === undefined || payload.strategy === GroupTaskStrategy.UNSPECIFIED) throw invalidParams("strategy is required", { field: "strategy" });
  const shard = payload.strategy === GroupTaskStrategy.SHARD;
  if (shard && (payload.shards.length === 0 || payload.shards.length > LIMITS.shards)) throw invalidParams(`a shard task has 1 to ${LIMITS.shards} shards`, { field: "shards" });
  if (!shard && payload.shards.length > 0) throw invalidParams("only shard tasks take shards", { field: "shards" });
  const timeout = payload.memberTimeout === undefined ? LIMITS.defaultMemberTimeoutMs : durationMs(payload.memberTimeout);
  if (timeout <= 0 || timeout > LIMITS.maxMemberTimeoutMs) throw invalidParams("member_timeout must be more than 0 and at most 24 h", { field: "member_timeout" });
  const workers = group.members.filter((member) => takesPart(member) && member.endpointUrl !== "");
  let assigned = workers.map((member) => member.agent!.agentId);
  if (payload.members.length > 0) {
    if (new Set(payload.members).size !== payload.members.length) throw invalidParams("members has repeats", { field: "members" });
    for (const agentId of payload.members) {
      const member = memberOf(group, agentId);
      if (member === undefined || !takesPart(member) || member.endpointUrl === "") {
        throw invalidParams(`${clip(agentId)} is not a coordinator or member with an endpoint_url`, { field: "members" });
      }
    }
    assigned = [...payload.members];
  }
  if (assigned.length === 0) throw refusedNow("no_members", "no coordinator or member has an endpoint_url to run sub-tasks");
  if (payload.strategy === GroupTaskStrategy.QUORUM && payload.quorum > assigned.length) {
    throw invalidParams(`quorum ${payload.quorum} is more than the ${assigned.length} assigned members`, { field: "quorum" });
  }
  return assigned;
}

export function submitTask(group: Group, opened: OpenedEnvelope, existing: GroupTask | undefined, openTasks: number, nowMs: number): TaskChange {
  const payload = opened.payload as GroupTaskSubmitPayload;
  requireActive(group);
  requireCoordinator(group, opened.header.sender!.agentId, "submit group tasks");
  const assigned = checkTerms(group, payload, opened.header);
  if (existing !== undefined) throw alreadyExists("group task", payload.groupTaskId);
  if (openTasks >= LIMITS.open) throw tooMany(`a group has at most ${LIMITS.open} running group tasks`);
  const n = assigned.length;
  const required = payload.strategy === GroupTaskStrategy.QUORUM ? payload.quorum || Math.floor(n / 2) + 1 : payload.strategy === GroupTaskStrategy.SHARD ? payload.shards.length : n;
  const task = create(GroupTaskSchema, {
    groupTaskId: payload.groupTaskId,
    groupId: group.groupId,
    submittedBy: opened.header.sender,
    request: signedMessage(opened.envelope, opened.header, opened.payload),
    strategy: payload.strategy,
    state: GroupTaskState.RUNNING,
    assigned,
    required,
    createdAt: timestampFromMs(nowMs),
    updatedAt: timestampFromMs(nowMs),
    taskType: payload.taskType,
  });
  const events: EventDraft[] = [{ kind: GroupEventKind.GROUP_TASK_SUBMITTED, ...causedBy(opened), subjectId: task.groupTaskId, groupTaskState: task.state }];
  return advance(task, events, nowMs);
}

/** Applies the strategy after a change: assigns, finishes, and says what to send and cancel. */
export function advance(task: GroupTask, events: EventDraft[], nowMs: number): TaskChange {
  const send: SubtaskRef[] = [];
  const cancel: SubtaskRef[] = [];
  const step = nextStep(task);
  for (const { slot, agentId, attempt } of step.assign) {
    const ref = create(SubtaskRefSchema, { groupTaskId: task.groupTaskId, subtaskId: subtaskId(task.groupTaskId, slot, attempt), agentId, slot, attempt });
    task.subtasks.push(
      create(SubtaskSchema, { ref, state: TaskState.PENDING, assignedAt: timestampFromMs(nowMs), deadline: timestampFromMs(nowMs + memberTimeoutMs(task)) }),
    );
    events.push({ kind: GroupEventKind.SUBTASK_ASSIGNED, subtask: ref, subjectId: task.groupTaskId, groupTaskState: task.state });
    send.push(ref);
  }
  if (step.verdict.kind === "completed") finish(task, GroupTaskState.COMPLETED, "", cancel, true);
  if (step.verdict.kind === "failed") finish(task, GroupTaskState.FAILED, step.verdict.reason, cancel, step.verdict.cancelRunning);
  if (!isOver(task)) task.state = task.subtasks.some((subtask) => !subtask.finished && WAITING_STATES.has(subtask.state)) ? GroupTaskState.WAITING : GroupTaskState.RUNNING;
  if (isOver(task)) events.push({ kind: GroupEventKind.GROUP_TASK_FINISHED, subjectId: task.groupTaskId, groupTaskState: task.state, reason: task.reason });
  task.completed = new Set(task.subtasks.filter(completedOk).map((subtask) => subtask.ref!.slot)).size;
  task.updatedAt = timestampFromMs(nowMs);
  return { task, events, send, cancel };
}

function finish(task: GroupTask, state: GroupTaskState, reason: string, cancel: SubtaskRef[], cancelRunning: boolean): void {
  task.state = state;
  task.reason = reason;
  for (const subtask of task.subtasks) {
    if (subtask.finished || !cancelRunning) continue;
    subtask.finished = true;
    subtask.lostReason = state === GroupTaskState.COMPLETED ? "not needed: the quorum was reached" : `cancelled: the group task is ${GroupTaskState[state].toLowerCase()}`;
    cancel.push(subtask.ref!);
  }
  // Quorum keeps the order outputs arrived in (the first `required`); the others keep slot order.
  const outputs = task.strategy === GroupTaskStrategy.QUORUM ? task.outputs.slice(0, task.required) : [...task.outputs].sort((a, b) => a.slot - b.slot);
  task.outputs = outputs;
}

function find(task: GroupTask, id: string): Subtask {
  const subtask = task.subtasks.find((entry) => entry.ref!.subtaskId === id);
  if (subtask === undefined) throw invalidParams(`no sub-task ${clip(id)} in group task ${clip(task.groupTaskId)}`, { field: "subtask_id" });
  return subtask;
}

export interface MemberEvent {
  envelope: Envelope;
  header: Header;
  type: MessageType;
  payload: Message;
  sequence: number;
}

/** A member's verified event about a sub-task; nothing when it is not the next one or the sub-task is over. */
export function recordMemberEvent(current: GroupTask, id: string, event: MemberEvent, nowMs: number): TaskChange | undefined {
  if (isOver(current)) return undefined;
  const task = clone(GroupTaskSchema, current);
  const subtask = find(task, id);
  if (subtask.finished || event.sequence !== Number(subtask.memberSequence) + 1) return undefined;
  subtask.memberSequence = BigInt(event.sequence);
  subtask.state = stateAfterEvent(subtask.state, event.type, event.payload) ?? subtask.state;
  const payload = event.payload;
  if (event.type === MessageType.TASK_STATUS_UPDATE) {
    const update = payload as TaskStatusUpdatePayload;
    subtask.progress = update.progress;
    subtask.statusMessage = update.message;
  }
  subtask.pendingInfo = event.type === MessageType.TASK_NEED_INFO ? (payload as TaskNeedInfoPayload) : subtask.state === TaskState.INFO_NEEDED ? subtask.pendingInfo : undefined;
  subtask.pendingDecision = event.type === MessageType.TASK_NEED_HUMAN ? (payload as TaskNeedHumanPayload) : WAITING_STATES.has(subtask.state) ? subtask.pendingDecision : undefined;
  if (isTerminal(subtask.state)) {
    subtask.finished = true;
    subtask.outcome = signedMessage(event.envelope, event.header, payload);
    if (subtask.state === TaskState.COMPLETED) {
      const complete = payload as TaskCompletePayload;
      const ref = subtask.ref!;
      task.outputs.push(create(MemberOutputSchema, { agentId: ref.agentId, slot: ref.slot, subtaskId: ref.subtaskId, output: complete.result?.output, taskComplete: subtask.outcome }));
    }
  }
  const events: EventDraft[] = [{ kind: GroupEventKind.SUBTASK_EVENT, subtask: subtask.ref, memberEvent: event.envelope, subjectId: task.groupTaskId }];
  const change = advance(task, events, nowMs);
  events[0]!.groupTaskState = change.task.state;
  return change;
}

/** The host gives up on a sub-task (unreachable, refused, timed out); nothing when it is over already. */
export function recordLost(current: GroupTask, id: string, reason: string, nowMs: number): TaskChange | undefined {
  if (isOver(current)) return undefined;
  const task = clone(GroupTaskSchema, current);
  const subtask = find(task, id);
  if (subtask.finished) return undefined;
  subtask.finished = true;
  subtask.lostReason = reason;
  const events: EventDraft[] = [{ kind: GroupEventKind.SUBTASK_LOST, subtask: subtask.ref, reason, subjectId: task.groupTaskId }];
  const change = advance(task, events, nowMs);
  events[0]!.groupTaskState = change.task.state;
  return change;
}

/** A coordinator's cancel (or dissolving the group): every running sub-task is cancelled at its member. */
export function cancelTask(current: GroupTask, reason: string, cause: OpenedEnvelope | undefined, nowMs: number): TaskChange {
  if (isOver(current)) throw refusedNow("group_task_over", `group task ${clip(current.groupTaskId)} is ${GroupTaskState[current.state].toLowerCase()}`);
  const task = clone(GroupTaskSchema, current);
  const cancel: SubtaskRef[] = [];
  finish(task, GroupTaskState.CANCELLED, reason || "cancelled", cancel, true);
  task.updatedAt = timestampFromMs(nowMs);
  const events: EventDraft[] = [{ kind: GroupEventKind.GROUP_TASK_FINISHED, ...(cause ? causedBy(cause) : {}), subjectId: task.groupTaskId, groupTaskState: task.state, reason: task.reason }];
  return { task, events, send: [], cancel };
}

/** Checks a coordinator's answer against the sub-task's question; returns the sub-task to forward it to. */
export function checkAnswer(group: Group, current: GroupTask | undefined, opened: OpenedEnvelope): Subtask {
  const payload = opened.payload as GroupTaskAnswerPayload;
  requireActive(group);
  requireCoordinator(group, opened.header.sender!.agentId, "answer sub-tasks");
  checkTaskId(opened.header, payload.groupTaskId);
  if (current === undefined) throw notFound("group task", payload.groupTaskId, group.groupId);
  if (isOver(current)) throw refusedNow("group_task_over", `group task ${clip(current.groupTaskId)} is over`);
  const subtask = find(current, payload.subtaskId);
  const asks = subtask.finished ? undefined : subtask.state === TaskState.INFO_NEEDED ? "info" : WAITING_STATES.has(subtask.state) ? "decision" : undefined;
  if (asks === undefined) throw refusedNow("not_waiting", `sub-task ${clip(payload.subtaskId)} is not waiting for an answer`);
  if (payload.answer.case !== asks) throw invalidParams(`sub-task ${clip(payload.subtaskId)} waits for ${asks === "info" ? "information" : "a decision"}`, { rule: "wrong_answer" });
  if (payload.answer.case === "decision" && (payload.answer.value.action === GroupDecisionAction.UNSPECIFIED || GroupDecisionAction[payload.answer.value.action] === undefined)) {
    throw invalidParams("decision.action is required", { field: "decision.action" });
  }
  return subtask;
}

export function recordAnswer(current: GroupTask, opened: OpenedEnvelope, nowMs: number): TaskChange {
  const task = clone(GroupTaskSchema, current);
  task.updatedAt = timestampFromMs(nowMs);
  const payload = opened.payload as GroupTaskAnswerPayload;
  const ref = find(task, payload.subtaskId).ref;
  return { task, events: [{ kind: GroupEventKind.GROUP_TASK_ANSWERED, ...causedBy(opened), subtask: ref, subjectId: task.groupTaskId, groupTaskState: task.state }], send: [], cancel: [] };
}

/** Sub-tasks of a running group task whose deadline has passed by `nowMs`. */
export function overdue(task: GroupTask, nowMs: number): Subtask[] {
  return isOver(task) ? [] : task.subtasks.filter((subtask) => !subtask.finished && subtask.deadline !== undefined && timestampMs(subtask.deadline) <= nowMs);
}
