// What a requester sends about its tasks, as signed envelopes through
// P2PService.Send: a task_request, and the answers to a running task
// (task_cancel, task_info_provided, human_decision, and the task_ack that
// says a human has taken a decision up). Every reply is verified before the
// page believes it. The same messages `synapse submit`, `cancel`,
// `provide-info` and `decide` send.
import { create, type DescMessage, type JsonObject, type MessageShape } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import type { Task } from "../../gen/synapse/v1/p2p_pb.js";
import {
  DecisionAction,
  HumanDecisionPayloadSchema,
  TaskAckPayloadSchema,
  TaskCancelPayloadSchema,
  TaskInfoProvidedPayloadSchema,
} from "../../gen/synapse/v1/payloads_pb.js";
import { uuidV7 } from "../protocol/ids.js";
import { sealMessage, sealTaskRequest, verifyEnvelope, wireName, type Verification } from "./envelopes.js";
import { p2p, type Session } from "./rpc.js";

export interface SendOutcome {
  /** The reply, verified (or why it is not to be believed). */
  reply: Verification | undefined;
  /** The task as the agent shows it after the message (unsigned). */
  task: Task | undefined;
}

export class ReplyNotVerified extends Error {
  constructor(reason: string) {
    super(`the agent's reply does not verify: ${reason}`);
    this.name = "ReplyNotVerified";
  }
}

/**
 * Sends one message about a task. The reply is the executor's event, addressed
 * to the task's requester (`requesterId`), which an escalation contact
 * deciding is not.
 */
async function send<Desc extends DescMessage>(session: Session, type: MessageType, schema: Desc, payload: MessageShape<Desc>, taskId: string, requesterId = session.identity.agentId): Promise<SendOutcome> {
  const { envelope } = await sealMessage(session.identity, session.executor, { type, schema, payload, taskId });
  const response = await p2p.send({ envelope });
  const reply = response.reply?.envelope
    ? verifyEnvelope(response.reply.envelope, { executor: session.executor, receiver: requesterId, taskId, checkTime: true })
    : undefined;
  if (reply !== undefined && !reply.ok) throw new ReplyNotVerified(reply.reason);
  return { reply, task: response.task };
}

/** Sends a new task; the reply (task_confirm, task_reject or task_need_info) is verified. */
export async function submitTask(session: Session, taskType: string, payload: JsonObject): Promise<SendOutcome & { taskId: string }> {
  const taskId = uuidV7();
  const { envelope } = await sealTaskRequest(session.identity, session.executor, { taskId, taskType, payload });
  // No wait: the reply comes as soon as the task is confirmed, refused or questioned; Watch shows the rest.
  const response = await p2p.send({ envelope });
  const reply = verifyEnvelope(response.reply?.envelope, { executor: session.executor, receiver: session.identity.agentId, taskId, checkTime: true });
  if (!reply.ok) throw new ReplyNotVerified(reply.reason);
  return { taskId, reply, task: response.task };
}

export function cancelTask(session: Session, taskId: string, reason: string): Promise<SendOutcome> {
  return send(session, MessageType.TASK_CANCEL, TaskCancelPayloadSchema, create(TaskCancelPayloadSchema, { taskId, reason }), taskId);
}

export function provideInfo(session: Session, taskId: string, fields: JsonObject, note: string): Promise<SendOutcome> {
  return send(session, MessageType.TASK_INFO_PROVIDED, TaskInfoProvidedPayloadSchema, create(TaskInfoProvidedPayloadSchema, { taskId, fields, note }), taskId);
}

/** The requester's task_ack of a need_human: a human has taken the decision up (need_human → human_deciding). */
export function takeUpDecision(session: Session, taskId: string): Promise<SendOutcome> {
  return send(session, MessageType.TASK_ACK, TaskAckPayloadSchema, create(TaskAckPayloadSchema, { taskId }), taskId);
}

export interface DecisionInput {
  action: "approve" | "modify" | "reject";
  /** The pending decision's id (Task.pending_decision.decision_id). */
  decisionId: string;
  /** approved_fields (approve) or modified_fields (modify). */
  fields: JsonObject;
  notes: string;
  rejectionReason: string;
  decidedBy: string;
}

/** A human_decision, from the requester or (at an escalation level that names them) a contact. */
export function decide(session: Session, taskId: string, requesterId: string, input: DecisionInput): Promise<SendOutcome> {
  const action = { approve: DecisionAction.APPROVE, modify: DecisionAction.MODIFY, reject: DecisionAction.REJECT }[input.action];
  const payload = create(HumanDecisionPayloadSchema, {
    taskId,
    decisionId: input.decisionId,
    decidedBy: { userId: session.identity.agentId, userName: input.decidedBy, role: "" },
    decision: {
      action,
      approvedFields: input.action === "approve" ? input.fields : undefined,
      modifiedFields: input.action === "modify" ? input.fields : undefined,
      rejectionReason: input.action === "reject" ? input.rejectionReason : "",
    },
    notes: input.notes,
    timestamp: timestampFromMs(Date.now()),
  });
  return send(session, MessageType.HUMAN_DECISION, HumanDecisionPayloadSchema, payload, taskId, requesterId);
}

/** "p2p:task_ack ✓" for a verified reply. */
export function replyLine(outcome: SendOutcome): string {
  return outcome.reply?.ok ? `${wireName(outcome.reply.type)} ✓` : "no reply";
}
