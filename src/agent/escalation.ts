// EscalationHandler: a task type's escalation policy (SupportedTaskType.
// escalation) says who decides a task_need_human at each level and how long
// each level waits. When a level's deadline passes without a decision, the
// task escalates: a new signed task_need_human one level up, with a new
// decision id, deadline and deciders; after the last level it fails with
// execution_timeout. Everything it needs is in the task's pending decision,
// in the store: levels and deadlines survive restarts, and whichever
// instance fires a deadline, only the first change sticks.
import { clone, create } from "@bufbuild/protobuf";
import { durationMs, timestampFromMs } from "@bufbuild/protobuf/wkt";
import { randomUUID } from "node:crypto";
import type { EscalationLevel, SupportedTaskType } from "../../gen/synapse/v1/capabilities_pb.js";
import { MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import { TaskFailedPayloadSchema, TaskNeedHumanPayloadSchema, type TaskNeedHumanPayload } from "../../gen/synapse/v1/payloads_pb.js";
import type { Logger } from "../log.js";
import type { TaskRecord, TaskStore } from "../store/store.js";
import { WAITING_FOR_HUMAN } from "../protocol/state-machine.js";
import type { EventRecorder } from "./recorder.js";
import { eventLogFields } from "../observability/log-fields.js";

/** The seed's levels: 1 team, 2 manager, 3 executive. */
export const MAX_ESCALATION_LEVEL = 3;

/** A policy that cannot work (checked when the agent is created). */
export class EscalationPolicyError extends Error {
  constructor(taskType: string, problem: string) {
    super(`escalation policy of task type ${taskType}: ${problem}`);
    this.name = "EscalationPolicyError";
  }
}

export class EscalationPolicies {
  private readonly levels = new Map<string, readonly EscalationLevel[]>();

  constructor(taskTypes: readonly SupportedTaskType[]) {
    for (const taskType of taskTypes) {
      const levels = taskType.escalation?.levels ?? [];
      if (levels.length === 0) continue;
      if (levels.length > MAX_ESCALATION_LEVEL) throw new EscalationPolicyError(taskType.type, `at most ${MAX_ESCALATION_LEVEL} levels`);
      levels.forEach((level, index) => {
        if (!level.requester && level.agentIds.length === 0) throw new EscalationPolicyError(taskType.type, `level ${index + 1} names no decider`);
        // Level 1 may take its deadline from the handler; a later level has only the policy's.
        if (index > 0 && (level.timeout === undefined || durationMs(level.timeout) <= 0)) {
          throw new EscalationPolicyError(taskType.type, `level ${index + 1} needs a timeout`);
        }
      });
      this.levels.set(taskType.type, levels);
    }
  }

  /** The policy's level (1-based) for a task type, if it has one. */
  level(taskType: string, level: number): EscalationLevel | undefined {
    return this.levels.get(taskType)?.[level - 1];
  }

  /** The agent ids that may decide at `level`: the requester's when the level allows it, and the contacts. */
  deciders(task: Pick<TaskRecord, "taskType" | "requester">, level: number): string[] {
    const found = this.level(task.taskType, level);
    if (found === undefined) return [];
    return [...new Set([...(found.requester ? [task.requester.agentId] : []), ...found.agentIds])];
  }

  /** How long `level` waits, when the policy says. */
  timeoutMs(taskType: string, level: number): number | undefined {
    const timeout = this.level(taskType, level)?.timeout;
    const ms = timeout === undefined ? 0 : durationMs(timeout);
    return ms > 0 ? ms : undefined;
  }
}

export interface EscalatorOptions {
  store: TaskStore;
  recorder: EventRecorder;
  policies: EscalationPolicies;
  logger: Logger;
  now: () => number;
}

/** Thrown inside a record's build when the task moved on: nothing is recorded. */
class Superseded extends Error {}

export class Escalator {
  constructor(private readonly options: EscalatorOptions) {}

  /**
   * The deadline of decision `decisionId` passed: escalates to the next
   * level, or fails the task after the last. Returns the task as it is
   * after (undefined when it had moved on already).
   */
  async expire(taskId: string, decisionId: string): Promise<TaskRecord | undefined> {
    const { store, recorder, policies, now } = this.options;
    const task = await store.getTask(taskId);
    if (task === undefined || !this.stillDue(task, decisionId)) return undefined;
    const level = task.pendingDecision!.escalationLevel || 1;
    const timeout = policies.timeoutMs(task.taskType, level + 1);
    try {
      const recorded = await recorder.record({
        taskId,
        build: (current) => {
          if (!this.stillDue(current, decisionId)) throw new Superseded();
          if (timeout !== undefined && level < MAX_ESCALATION_LEVEL) {
            const message = this.nextLevel(current, level + 1, now() + timeout);
            return { type: MessageType.TASK_NEED_HUMAN, message, patch: { pendingDecision: message, statusMessage: `escalated to level ${level + 1}` } };
          }
          const reason = `no human decision at escalation level ${level} before its deadline`;
          const message = create(TaskFailedPayloadSchema, { taskId, error: { code: ErrorCode.EXECUTION_TIMEOUT, message: reason, recoverable: true } });
          return {
            type: MessageType.TASK_FAILED,
            message,
            patch: { error: message.error, statusMessage: reason, pendingInfo: undefined, pendingDecision: undefined, leaseOwner: "", leaseUntilMs: 0 },
          };
        },
      });
      if (recorded !== undefined) {
        this.options.logger.info(
          { ...eventLogFields(recorded.event), from_level: level, outcome: recorded.task.pendingDecision ? "escalated" : "failed" },
          "a human decision's deadline passed",
        );
      }
      return recorded?.task;
    } catch (error) {
      if (error instanceof Superseded) return undefined;
      throw error;
    }
  }

  private stillDue(task: TaskRecord, decisionId: string): boolean {
    const pending = task.pendingDecision;
    // The decision id names one level of one question: a timer of an earlier level, anywhere, changes nothing.
    return WAITING_FOR_HUMAN.has(task.state) && pending?.decisionId === decisionId && pending.deadline !== undefined;
  }

  /** The same question one level up: a new decision id, deadline and deciders. */
  private nextLevel(task: TaskRecord, level: number, deadlineMs: number): TaskNeedHumanPayload {
    const message = clone(TaskNeedHumanPayloadSchema, task.pendingDecision!);
    message.decisionId = randomUUID();
    message.escalationLevel = level;
    message.deadline = timestampFromMs(deadlineMs);
    message.deciders = this.options.policies.deciders(task, level);
    if (message.context !== undefined) message.context.currentProgress = task.progress;
    return message;
  }
}
