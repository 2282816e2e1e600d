// Questions a running handler asks its requester (need_info, need_human),
// and how it waits for the answer: through the store, so that the answer
// may reach any instance, and a run of the task after a restart gets the
// answers recorded before, in order, instead of asking again.
import { create, type JsonObject, type Message } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { randomUUID } from "node:crypto";
import { MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import { TaskNeedHumanPayloadSchema, TaskNeedInfoPayloadSchema, TaskState } from "../../gen/synapse/v1/payloads_pb.js";
import { toValue } from "../protocol/json-values.js";
import { isTerminal, WAITING_FOR_HUMAN } from "../protocol/state-machine.js";
import type { TaskAnswer, TaskPatch, TaskRecord, TaskStore } from "../store/store.js";
import type { DecisionDeadlines } from "./deadlines.js";
import type { EscalationPolicies } from "./escalation.js";
import type { TaskEventBus } from "./events.js";
import type { Execution } from "./execution.js";
import type { HumanAnswer, HumanQuestion, MissingFieldSpec } from "./handler.js";
import { toMissingField } from "./missing-fields.js";
import type { EventRecorder } from "./recorder.js";

const WAITING_FOR_INFO = new Set([TaskState.INFO_NEEDED]);

export interface QuestionsOptions {
  store: TaskStore;
  bus: TaskEventBus;
  recorder: EventRecorder;
  deadlines: DecisionDeadlines;
  /** Who decides at which level, and how long the first level waits when the handler does not say. */
  escalation: EscalationPolicies;
  now: () => number;
  /** This instance: questions are recorded only while it holds the task's lease. */
  instanceId: string;
  /** Runs a write of a run, stopping the run if the lease is gone. */
  fenced<T>(taskId: string, write: () => Promise<T>): Promise<T>;
}

export class Questions {
  constructor(private readonly options: QuestionsOptions) {}

  private get me(): string {
    return this.options.instanceId;
  }

  async askForInfo(execution: Execution, fields: MissingFieldSpec[], question: string | undefined): Promise<JsonObject> {
    const taskId = execution.input.taskId;
    const replayed = await this.replayAnswer(execution, (answer) => answer.kind === "info" && answer.phase === "execution");
    if (replayed?.kind === "info") return replayed.fields;
    const message = create(TaskNeedInfoPayloadSchema, { taskId, missingFields: fields.map(toMissingField), question: question ?? "" });
    const answer = await this.askAndWait(execution, WAITING_FOR_INFO, (answer) => answer.kind === "info", {
      type: MessageType.TASK_NEED_INFO,
      message,
      patch: { pendingInfo: message, statusMessage: question ?? "waiting for information" },
    });
    return answer.kind === "info" ? answer.fields : {};
  }

  async askHuman(execution: Execution, question: HumanQuestion): Promise<HumanAnswer> {
    const taskId = execution.input.taskId;
    const replayed = await this.replayAnswer(execution, (answer) => answer.kind === "decision" && answer.code === question.code);
    if (replayed?.kind === "decision") return humanAnswer(replayed);
    const task = await this.options.store.getTask(taskId);
    const level = question.escalationLevel ?? 1;
    const policyTimeout = task === undefined ? undefined : this.options.escalation.timeoutMs(task.taskType, level);
    const deadlineMs = question.deadline?.getTime() ?? (policyTimeout === undefined ? undefined : this.options.now() + policyTimeout);
    const message = create(TaskNeedHumanPayloadSchema, {
      taskId,
      decisionId: randomUUID(),
      reason: { code: question.code, message: question.message },
      context: { taskSummary: question.taskSummary ?? "", currentProgress: task?.progress ?? 0, blockedReason: question.blockedReason ?? "" },
      options: (question.options ?? []).map((option) => ({
        field: option.field,
        value: toValue(option.value),
        prosCons: option.prosCons ?? "",
        confidence: option.confidence ?? 0,
      })),
      escalationLevel: level,
      deadline: deadlineMs === undefined ? undefined : timestampFromMs(deadlineMs),
      // Empty without a policy: then the requester alone decides.
      deciders: task === undefined ? [] : this.options.escalation.deciders(task, level),
    });
    const answer = await this.askAndWait(execution, WAITING_FOR_HUMAN, (answer) => answer.kind === "decision", {
      type: MessageType.TASK_NEED_HUMAN,
      message,
      patch: { pendingDecision: message, statusMessage: question.message },
    });
    if (answer.kind !== "decision") throw new Error("a decision was expected");
    return humanAnswer(answer);
  }

  /** On a run after the first, the next recorded answer of the kind asked for, if there is one. */
  private async replayAnswer(execution: Execution, matches: (answer: TaskAnswer) => boolean): Promise<TaskAnswer | undefined> {
    if (execution.input.attempt <= 1) return undefined;
    const task = await this.options.store.getTask(execution.input.taskId);
    const answers = task?.answers ?? [];
    for (let index = execution.answerCursor; index < answers.length; index++) {
      const answer = answers[index]!;
      if (!matches(answer)) continue;
      execution.answerCursor = index + 1;
      return answer;
    }
    return undefined;
  }

  /** Records the question, then waits (through the store, so any instance may take the answer) for the answer after it. */
  private async askAndWait(
    execution: Execution,
    waitingStates: ReadonlySet<TaskState>,
    isAnswer: (answer: TaskAnswer) => boolean,
    question: { type: MessageType; message: Message; patch: TaskPatch },
  ): Promise<TaskAnswer> {
    const taskId = execution.input.taskId;
    const signal = execution.signal;
    const asked = await this.options.fenced(taskId, () => this.options.recorder.record({ taskId, fence: this.me, build: () => question }));
    if (asked === undefined) throw new Error("the task can no longer ask");
    const from = asked.task.answers.length;
    if (question.type === MessageType.TASK_NEED_HUMAN) this.options.deadlines.arm(asked.task);
    return new Promise<TaskAnswer>((resolve, reject) => {
      let settled = false;
      const finish = (outcome: () => void) => {
        if (settled) return;
        settled = true;
        unsubscribe();
        signal.removeEventListener("abort", onAbort);
        outcome();
      };
      const check = (task: TaskRecord | undefined) => {
        if (task === undefined || isTerminal(task.state)) return finish(() => reject(new Error("the task ended while it waited")));
        const index = task.answers.findIndex((answer, i) => i >= from && isAnswer(answer));
        if (index >= 0) {
          execution.answerCursor = index + 1;
          return finish(() => resolve(task.answers[index]!));
        }
        if (!waitingStates.has(task.state) && task.state !== TaskState.INFO_PROVIDED && task.state !== TaskState.HUMAN_APPROVED) {
          return finish(() => reject(new Error(`the task left its waiting state (${TaskState[task.state]})`)));
        }
      };
      const look = () => void this.options.store.getTask(taskId).then(check, () => undefined);
      // A confidential task's change carries its record as stored, its answers sealed: read it through the store, which opens them.
      const unsubscribe = this.options.bus.subscribe(taskId, (change) => (change.task && change.task.confidential === undefined ? check(change.task) : look()));
      const onAbort = () => finish(() => reject(signal.reason));
      signal.addEventListener("abort", onAbort, { once: true });
      look(); // it may have been answered before the subscription
    });
  }

}

function humanAnswer(answer: Extract<TaskAnswer, { kind: "decision" }>): HumanAnswer {
  return { action: answer.action, fields: answer.fields, notes: answer.notes, decidedBy: answer.decidedBy };
}
