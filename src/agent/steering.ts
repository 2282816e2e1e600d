// Steering: what a task's requester may send about it (cancel, the
// information asked for, a human decision, the acknowledgement that a human
// is deciding). Only the requester may, except a human decision: the
// pending task_need_human names its deciders (the task type's escalation
// policy). Each is checked against the state machine and recorded as the
// executor's signed task_ack, with the message that caused it, in one
// commit. An answer wakes whichever instance's run waits for it; with none
// waiting, this instance carries on.
import { create, type JsonObject } from "@bufbuild/protobuf";
import { MessageType, type Header } from "../../gen/synapse/v1/envelope_pb.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import {
  DecisionAction,
  TaskAckPayloadSchema,
  TaskErrorSchema,
  TaskState,
  type HumanDecisionPayload,
  type TaskCancelPayload,
  type TaskInfoProvidedPayload,
} from "../../gen/synapse/v1/payloads_pb.js";
import { protocolError, taskNotFound } from "../protocol/errors.js";
import { wireName } from "../protocol/message-types.js";
import { allowedMessageTypes, isTerminal, stateName, transition } from "../protocol/state-machine.js";
import type { TaskRecord, TaskStore } from "../store/store.js";
import { TaskAccess } from "./access.js";
import type { Cause, SendOutcome } from "./send-outcome.js";
import type { EventRecorder } from "./recorder.js";
import type { ExecutionRunner } from "./runner.js";

export interface SteeringOptions {
  store: TaskStore;
  recorder: EventRecorder;
  runner: ExecutionRunner;
}

/** A message on a confidential task must be confidential too (docs/PROTOCOL.md §9.4). */
function requireSealedAsTask(task: TaskRecord, header: Header): void {
  if (task.confidential !== undefined && header.confidential === undefined) {
    throw protocolError(ErrorCode.CONFIDENTIALITY_REQUIRED, `task ${task.taskId} is confidential: ${wireName(header.messageType)} must be sealed to it`);
  }
}

export class TaskSteering {
  private readonly access: TaskAccess;

  constructor(private readonly options: SteeringOptions) {
    this.access = new TaskAccess(options.store);
  }

  async requireOwnTask(header: Header): Promise<TaskRecord> {
    const task = await this.options.store.getTask(header.taskId);
    // A task of another requester does not exist as far as this sender can tell: the same answer as for no task.
    if (task === undefined) throw taskNotFound(header.taskId);
    if (task.requester.agentId !== header.sender!.agentId) {
      // An escalation contact knows the task, and is told why instead.
      if (!(await this.access.mayRead(task, header.sender!.agentId))) throw taskNotFound(header.taskId);
      throw protocolError(ErrorCode.PERMISSION_DENIED, `only the requester of task ${task.taskId} may send ${wireName(header.messageType)}; escalation contacts decide`);
    }
    requireSealedAsTask(task, header);
    return task;
  }

  /**
   * The task, if the sender may decide its pending decision: one of the
   * deciders it names (the requester alone when it names none). Another
   * party (the requester, a contact of another level) is refused with
   * PERMISSION_DENIED; anyone else learns nothing: task_not_found.
   */
  async requireDecider(header: Header): Promise<TaskRecord> {
    const sender = header.sender!.agentId;
    const task = await this.options.store.getTask(header.taskId);
    if (task === undefined || !(await this.access.mayRead(task, sender))) throw taskNotFound(header.taskId);
    requireSealedAsTask(task, header);
    const pending = task.pendingDecision;
    if (pending === undefined) return task; // nothing to decide: the state machine refuses it
    const deciders = pending.deciders.length > 0 ? pending.deciders : [task.requester.agentId];
    if (!deciders.includes(sender)) {
      throw protocolError(ErrorCode.PERMISSION_DENIED, `agent ${sender} may not decide task ${task.taskId} at escalation level ${pending.escalationLevel || 1}`, {
        details: { task_id: task.taskId, escalation_level: pending.escalationLevel || 1, deciders },
      });
    }
    return task;
  }

  refuseTransition(task: TaskRecord, type: MessageType): never {
    const details = {
      task_id: task.taskId,
      state: `TASK_STATE_${TaskState[task.state]}`,
      message_type: `MESSAGE_TYPE_${MessageType[type]}`,
      allowed: allowedMessageTypes(task.state).map((allowed) => `MESSAGE_TYPE_${MessageType[allowed]}`),
    };
    if (isTerminal(task.state)) {
      throw protocolError(ErrorCode.TASK_ALREADY_COMPLETED, `task ${task.taskId} is ${stateName(task.state)}; ${wireName(type)} changes nothing`, { details });
    }
    throw protocolError(ErrorCode.ILLEGAL_TRANSITION, `${wireName(type)} is not allowed while task ${task.taskId} is ${stateName(task.state)}`, { details });
  }

  /** Refuses with the task's current state after a transition that was no longer allowed. */
  private async refuseNow(taskId: string, type: MessageType): Promise<never> {
    const task = await this.options.store.getTask(taskId);
    if (task === undefined) throw taskNotFound(taskId);
    this.refuseTransition(task, type);
  }

  async cancel(header: Header, cancel: TaskCancelPayload, cause: Cause): Promise<SendOutcome> {
    const task = await this.requireOwnTask(header);
    if (!transition(task.state, MessageType.TASK_CANCEL).allowed) this.refuseTransition(task, MessageType.TASK_CANCEL);
    const reason = cancel.reason || "cancelled by the requester";
    const recorded = await this.options.recorder.record({
      taskId: task.taskId,
      apply: MessageType.TASK_CANCEL,
      eventType: MessageType.TASK_ACK,
      replyTo: header.messageId,
      cause,
      build: (current) => ({
        message: create(TaskAckPayloadSchema, {
          taskId: current.taskId,
          acknowledgedMessageId: header.messageId,
          acknowledgedType: MessageType.TASK_CANCEL,
          state: TaskState.CANCELLED,
          message: reason,
        }),
        patch: {
          error: create(TaskErrorSchema, { code: ErrorCode.TASK_CANCELLED, message: reason }),
          statusMessage: reason,
          pendingInfo: undefined,
          pendingDecision: undefined,
        },
      }),
    });
    if (recorded === undefined) return this.refuseNow(task.taskId, MessageType.TASK_CANCEL);
    // A run elsewhere stops when it sees the task end; a local one stops now.
    this.options.runner.stopRun(task.taskId, "cancelled");
    return { reply: recorded.event, task: recorded.task };
  }

  async provideInfo(header: Header, provided: TaskInfoProvidedPayload, cause: Cause): Promise<SendOutcome> {
    const task = await this.requireOwnTask(header);
    if (!transition(task.state, MessageType.TASK_INFO_PROVIDED).allowed) this.refuseTransition(task, MessageType.TASK_INFO_PROVIDED);
    const fields: JsonObject = provided.fields ?? {};
    const recorded = await this.options.recorder.record({
      taskId: task.taskId,
      apply: MessageType.TASK_INFO_PROVIDED,
      eventType: MessageType.TASK_ACK,
      replyTo: header.messageId,
      cause,
      build: (current) => ({
        message: create(TaskAckPayloadSchema, {
          taskId: current.taskId,
          acknowledgedMessageId: header.messageId,
          acknowledgedType: MessageType.TASK_INFO_PROVIDED,
          state: TaskState.INFO_PROVIDED,
          message: `received ${Object.keys(fields).join(", ") || "no fields"}`,
        }),
        patch: {
          payload: { ...current.payload, ...fields },
          pendingInfo: undefined,
          statusMessage: "information provided",
          answers: [...current.answers, { kind: "info", phase: current.executionAttempts > 0 ? "execution" : "admission", fields }],
        },
      }),
    });
    if (recorded === undefined) return this.refuseNow(task.taskId, MessageType.TASK_INFO_PROVIDED);
    // A waiting run (here or at another instance) takes the answer; with none, this instance carries on.
    await this.options.runner.afterAnswer(recorded.task);
    return { reply: recorded.event, task: (await this.options.store.getTask(task.taskId)) ?? recorded.task };
  }

  async decide(header: Header, decision: HumanDecisionPayload, cause: Cause): Promise<SendOutcome> {
    const task = await this.requireDecider(header);
    const action = decision.decision?.action ?? DecisionAction.UNSPECIFIED;
    if (action === DecisionAction.UNSPECIFIED) {
      throw protocolError(ErrorCode.INVALID_PARAMS, "decision.action must be approve, reject or modify");
    }
    if (!transition(task.state, MessageType.HUMAN_DECISION, action).allowed) this.refuseTransition(task, MessageType.HUMAN_DECISION);
    const expected = task.pendingDecision?.decisionId;
    if (decision.decisionId && expected && decision.decisionId !== expected) {
      throw protocolError(ErrorCode.INVALID_PARAMS, `decision_id ${decision.decisionId} does not answer the pending decision ${expected}`);
    }
    const approved = action !== DecisionAction.REJECT;
    const fields: JsonObject = { ...(decision.decision?.approvedFields ?? {}), ...(decision.decision?.modifiedFields ?? {}) };
    const decidedBy = { userId: decision.decidedBy?.userId ?? "", userName: decision.decidedBy?.userName ?? "", role: decision.decidedBy?.role ?? "" };
    const recorded = await this.options.recorder.record({
      taskId: task.taskId,
      apply: MessageType.HUMAN_DECISION,
      action,
      eventType: MessageType.TASK_ACK,
      replyTo: header.messageId,
      cause,
      build: (current) => {
        // Escalated since the check: the decision no longer answers what is pending, nor, perhaps, by the right decider.
        if (current.pendingDecision?.decisionId !== task.pendingDecision?.decisionId) {
          throw protocolError(ErrorCode.INVALID_PARAMS, `the pending decision of task ${task.taskId} was escalated meanwhile; decide the new one (decision_id ${current.pendingDecision?.decisionId ?? "none"})`);
        }
        return {
          message: create(TaskAckPayloadSchema, {
            taskId: current.taskId,
            acknowledgedMessageId: header.messageId,
            acknowledgedType: MessageType.HUMAN_DECISION,
            state: approved ? TaskState.HUMAN_APPROVED : TaskState.HUMAN_REJECTED,
            message: approved ? `${DecisionAction[action].toLowerCase()}d by ${decidedBy.userName || decidedBy.userId || "a human"}` : decision.decision?.rejectionReason || "rejected",
          }),
          patch: {
            pendingDecision: undefined,
            payload: approved ? { ...current.payload, ...fields } : current.payload,
            statusMessage: approved ? "approved" : decision.decision?.rejectionReason || "rejected by a human",
            answers: approved
              ? [
                  ...current.answers,
                  {
                    kind: "decision",
                    decisionId: current.pendingDecision?.decisionId ?? decision.decisionId,
                    code: current.pendingDecision?.reason?.code ?? "",
                    action: action === DecisionAction.MODIFY ? "modify" : "approve",
                    fields,
                    notes: decision.notes,
                    decidedBy,
                  },
                ]
              : current.answers,
          },
        };
      },
    });
    if (recorded === undefined) return this.refuseNow(task.taskId, MessageType.HUMAN_DECISION);
    if (approved) {
      await this.options.runner.afterAnswer(recorded.task);
    } else {
      // A rejection ends the task: it fails with human_rejected, and any run of it stops.
      const reason = decision.decision?.rejectionReason || "a human rejected the task";
      await this.options.runner.recordFailure(task.taskId, { code: ErrorCode.HUMAN_REJECTED, message: reason, recoverable: false });
      this.options.runner.stopRun(task.taskId, "rejected by a human");
    }
    return { reply: recorded.event, task: (await this.options.store.getTask(task.taskId)) ?? recorded.task };
  }

  /** A task_ack while a human is asked: a human has taken it up. (At a terminal task it changes nothing; the engine answers it.) */
  async acknowledge(header: Header, task: TaskRecord, cause: Cause): Promise<SendOutcome> {
    if (!transition(task.state, MessageType.TASK_ACK).allowed) this.refuseTransition(task, MessageType.TASK_ACK);
    const recorded = await this.options.recorder.record({
      taskId: task.taskId,
      apply: MessageType.TASK_ACK,
      eventType: MessageType.TASK_ACK,
      replyTo: header.messageId,
      cause,
      build: (current) => ({
        message: create(TaskAckPayloadSchema, {
          taskId: current.taskId,
          acknowledgedMessageId: header.messageId,
          acknowledgedType: MessageType.TASK_ACK,
          state: TaskState.HUMAN_DECIDING,
          message: "a human is deciding",
        }),
        patch: { statusMessage: "a human is deciding" },
      }),
    });
    if (recorded === undefined) return this.refuseNow(task.taskId, MessageType.TASK_ACK);
    return { reply: recorded.event, task: recorded.task };
  }

}
