// Running group tasks (GroupTaskHandler): each sub-task is a real P2P task
// at its member, requested by the host with its own key through the
// outbound policy, and followed with Watch (resumable) until it ends or
// times out. Every event the member signs is recorded in the group's log
// as it is; the strategy then decides what comes next. A host that starts
// again resumes every running group task from the member events it has.
import type { JsonObject } from "@bufbuild/protobuf";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs, timestampMs } from "@bufbuild/protobuf/wkt";
import { ConnectError } from "@connectrpc/connect";
import { GroupDecisionAction, type GroupTaskAnswerPayload, type SubtaskRef } from "../../gen/synapse/v1/a2n_pb.js";
import { MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import type { GroupTask, Subtask } from "../../gen/synapse/v1/group_pb.js";
import { DecisionAction, HumanDecisionPayloadSchema } from "../../gen/synapse/v1/payloads_pb.js";
import type { SynapseClient } from "../client/requester.js";
import type { Logger } from "../log.js";
import type { GroupStorage } from "../store/group-storage.js";
import type { GroupLog } from "./log.js";
import type { MemberConnector } from "./members.js";
import { memberOf } from "./rules.js";
import { submitTerms } from "./strategy.js";
import { isOver, memberTimeoutMs, recordLost, recordMemberEvent, subtaskInput, type TaskChange } from "./tasks.js";

export interface FanoutOptions {
  log: GroupLog;
  storage: GroupStorage;
  members: MemberConnector;
  logger: Logger;
  now: () => number;
}

/** A coordinator's decision as the member's protocol spells it. */
export const DECISIONS: ReadonlyMap<GroupDecisionAction, DecisionAction> = new Map([
  [GroupDecisionAction.APPROVE, DecisionAction.APPROVE],
  [GroupDecisionAction.REJECT, DecisionAction.REJECT],
  [GroupDecisionAction.MODIFY, DecisionAction.MODIFY],
]);

/** setTimeout's longest delay; later deadlines are looked at again then. */
const MAX_TIMER_MS = 2 ** 31 - 1;

interface Following {
  abort: AbortController;
  timer: NodeJS.Timeout;
}

export class GroupTaskRunner {
  private readonly following = new Map<string, Following>();
  private readonly work = new Set<Promise<void>>();
  private stopped = false;

  constructor(private readonly options: FanoutOptions) {}

  /** Picks up every running group task: sends what may not have been sent, follows the rest. */
  async start(): Promise<void> {
    for (const task of await this.options.storage.listActiveGroupTasks(10_000)) {
      for (const subtask of task.subtasks) if (!subtask.finished) this.follow(task.groupId, subtask, true);
    }
  }

  /** After a commit: sends the sub-tasks it assigned and cancels the ones it gave up. */
  dispatch(groupId: string, change: Pick<TaskChange, "task" | "send" | "cancel">): void {
    for (const ref of change.send) {
      const subtask = change.task.subtasks.find((entry) => entry.ref?.subtaskId === ref.subtaskId);
      if (subtask !== undefined) this.follow(groupId, subtask, true);
    }
    for (const ref of change.cancel) {
      this.unfollow(groupId, ref);
      this.track(this.cancelAt(groupId, ref, `the group task is ${isOver(change.task) ? "over" : "moving on"}`));
    }
  }

  /** Forwards a coordinator's answer to the member, signed by the host (the sub-task's requester). */
  async forward(groupId: string, subtask: Subtask, answer: GroupTaskAnswerPayload, coordinatorId: string): Promise<void> {
    const client = await this.clientFor(groupId, subtask.ref!.agentId);
    const taskId = subtask.ref!.subtaskId;
    if (answer.answer.case === "info") {
      await client.provideInfo(taskId, (answer.answer.value ?? {}) as JsonObject, { note: answer.note });
      return;
    }
    const decision = answer.answer.value!;
    const action = DECISIONS.get(decision.action)!;
    const payload = create(HumanDecisionPayloadSchema, {
      taskId,
      decisionId: subtask.pendingDecision?.decisionId ?? "",
      decidedBy: { userId: coordinatorId, role: "group coordinator" },
      decision: {
        action,
        approvedFields: action === DecisionAction.APPROVE ? decision.fields : undefined,
        modifiedFields: action === DecisionAction.MODIFY ? decision.fields : undefined,
        rejectionReason: decision.rejectionReason,
      },
      notes: answer.note,
      timestamp: timestampFromMs(this.options.now()),
    });
    await client.sendEnvelope(client.envelope(MessageType.HUMAN_DECISION, payload, { taskId }));
  }

  private key = (groupId: string, ref: SubtaskRef) => `${groupId}\u0000${ref.subtaskId}`;

  private follow(groupId: string, subtask: Subtask, send: boolean): void {
    const ref = subtask.ref!;
    const key = this.key(groupId, ref);
    if (this.stopped || this.following.has(key)) return;
    const abort = new AbortController();
    const deadline = subtask.deadline ? timestampMs(subtask.deadline) : this.options.now();
    const timer = setTimeout(() => this.track(this.timedOut(groupId, ref, deadline)), Math.min(MAX_TIMER_MS, Math.max(0, deadline - this.options.now())));
    timer.unref();
    this.following.set(key, { abort, timer });
    this.track(this.run(groupId, subtask, send, abort.signal).finally(() => this.unfollow(groupId, ref, abort)));
  }

  private unfollow(groupId: string, ref: SubtaskRef, only?: AbortController): void {
    const key = this.key(groupId, ref);
    const entry = this.following.get(key);
    if (entry === undefined || (only !== undefined && entry.abort !== only)) return;
    this.following.delete(key);
    clearTimeout(entry.timer);
    entry.abort.abort();
  }

  private async clientFor(groupId: string, agentId: string): Promise<SynapseClient> {
    const group = (await this.options.storage.getGroup(groupId))?.group;
    const member = group === undefined ? undefined : memberOf(group, agentId);
    if (member === undefined || member.endpointUrl === "") throw new Error(`${agentId} is no longer a member with an endpoint`);
    return this.options.members.client(member);
  }

  private async run(groupId: string, subtask: Subtask, send: boolean, signal: AbortSignal): Promise<void> {
    const ref = subtask.ref!;
    try {
      const client = await this.clientFor(groupId, ref.agentId);
      if (send) {
        const task = await this.options.storage.getGroupTask(groupId, ref.groupTaskId);
        if (task === undefined || isOver(task)) return;
        // The sub-task's id doubles as its idempotency key: sent again after a restart, it is the same task.
        await client.submit(task.taskType, subtaskInput(task, ref.slot), {
          taskId: ref.subtaskId,
          idempotencyKey: ref.subtaskId,
          sessionId: groupId,
          correlationId: ref.groupTaskId,
          parentTaskId: ref.groupTaskId,
          metadata: { group_id: groupId, group_task_id: ref.groupTaskId, slot: ref.slot, attempt: ref.attempt },
          confidential: submitTerms(task).confidential,
        });
      }
      for await (const item of client.watch(ref.subtaskId, { fromSequence: Number(subtask.memberSequence) + 1, signal })) {
        if (item.kind !== "event") continue;
        const event = { envelope: item.event.envelope, header: item.event.header, type: item.event.type, payload: item.event.payload, sequence: item.sequence };
        if (await this.record(groupId, ref, (task) => recordMemberEvent(task, ref.subtaskId, event, this.options.now()))) return;
      }
    } catch (error) {
      if (signal.aborted || this.stopped) return;
      const reason = error instanceof ConnectError ? error.rawMessage : error instanceof Error ? error.message : String(error);
      this.options.logger.info({ group_id: groupId, subtask_id: ref.subtaskId, member: ref.agentId, err: reason }, "gave up on a sub-task");
      await this.record(groupId, ref, (task) => recordLost(task, ref.subtaskId, `member unavailable: ${reason}`, this.options.now()));
    }
  }

  private async timedOut(groupId: string, ref: SubtaskRef, deadline: number): Promise<void> {
    if (this.stopped) return;
    if (deadline > this.options.now()) {
      // A deadline beyond one timer's reach: look again then.
      const task = await this.options.storage.getGroupTask(groupId, ref.groupTaskId);
      const subtask = task?.subtasks.find((entry) => entry.ref?.subtaskId === ref.subtaskId);
      this.unfollow(groupId, ref);
      if (subtask !== undefined && !subtask.finished) this.follow(groupId, subtask, false);
      return;
    }
    this.unfollow(groupId, ref);
    let lost = false;
    await this.record(groupId, ref, (task) => {
      const change = recordLost(task, ref.subtaskId, `timed out after ${Math.round(memberTimeoutMs(task) / 1000)} s`, this.options.now());
      lost = change !== undefined;
      return change;
    });
    if (lost) await this.cancelAt(groupId, ref, "timed out");
  }

  /** Commits what `apply` makes of the group task; true when the sub-task (or the group task) is over. */
  private async record(groupId: string, ref: SubtaskRef, apply: (task: GroupTask) => TaskChange | undefined): Promise<boolean> {
    const { log, storage } = this.options;
    const committed = await log.update(groupId, async (record) => {
      const task = await storage.getGroupTask(groupId, ref.groupTaskId);
      const change = task === undefined ? undefined : apply(task);
      if (change === undefined) return { group: record.group, events: [], result: undefined };
      return { group: record.group, events: change.events, groupTasks: [change.task], result: change };
    });
    const change = committed?.result;
    if (change !== undefined) this.dispatch(groupId, change);
    const task = change?.task ?? (await storage.getGroupTask(groupId, ref.groupTaskId));
    const subtask = task?.subtasks.find((entry) => entry.ref?.subtaskId === ref.subtaskId);
    return task === undefined || isOver(task) || subtask === undefined || subtask.finished;
  }

  private async cancelAt(groupId: string, ref: SubtaskRef, reason: string): Promise<void> {
    try {
      const client = await this.clientFor(groupId, ref.agentId);
      await client.cancel(ref.subtaskId, reason);
    } catch (error) {
      // Best effort: the member may be gone, or the sub-task over already.
      this.options.logger.debug({ group_id: groupId, subtask_id: ref.subtaskId, err: error instanceof Error ? error.message : String(error) }, "could not cancel a sub-task");
    }
  }

  private track(work: Promise<void>): void {
    const tracked = work.catch((error: unknown) => this.options.logger.warn({ err: error }, "group task work failed"));
    this.work.add(tracked);
    void tracked.finally(() => this.work.delete(tracked));
  }

  /** Stops following; running sub-tasks go on at the members and are picked up at the next start. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const entry of this.following.values()) {
      clearTimeout(entry.timer);
      entry.abort.abort();
    }
    this.following.clear();
    await Promise.allSettled([...this.work]);
  }
}
