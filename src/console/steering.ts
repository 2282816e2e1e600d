// What a requester sends about its tasks, as signed envelopes through
// P2PService.Send: a task_request, and the answers to a running task
// (task_cancel, task_info_provided, human_decision, and the task_ack that
// says a human has taken a decision up). Every reply is verified before the
// page believes it. The same messages `synapse submit`, `cancel`,
// `provide-info` and `decide` send. Every message about a confidential task
// is sealed with its task key (docs/PROTOCOL.md §9.4), and the sealed events
// the agent answers with are opened before they are checked.
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
import { sealMessage, sealTaskRequest, wireName, type Verification } from "./envelopes.js";
import { p2p, type Session } from "./rpc.js";
import { verifyMessage } from "./task-keys.js";

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
async function send<Desc extends DescMessage>(
  session: Session,
  type: MessageType,
  schema: Desc,
  payload: MessageShape<Desc>,
  taskId: string,
  requesterId = session.identity.agentId,
  confidential = false,
): Promise<SendOutcome> {
  const sealing = confidential ? await session.keys.sealingFor(taskId) : undefined;
  const { envelope } = await sealMessage(session.identity, session.executor, { type, schema, payload, taskId, sealing });
  const response = await p2p.send({ envelope });
  const reply = response.reply?.envelope
    ? (await verifyMessage(session.keys, session.executor, response.reply.envelope, { executor: session.executor, receiver: requesterId, taskId, checkTime: true })).verification
    : undefined;
  if (reply !== undefined && !reply.ok) throw new ReplyNotVerified(reply.reason);
  return { reply, task: response.task };
}

/**
 * Sends a new task; the reply (task_confirm, task_reject or task_need_info)
 * is verified. A confidential one is sealed with a fresh task key wrapped
 * to the executor's verified encryption key and to this console's.
 */
export async function submitTask(session: Session, taskType: string, payload: JsonObject, options: { confidential?: boolean } = {}): Promise<SendOutcome & { taskId: string }> {
  const taskId = uuidV7();
  const sealing = options.confidential ? await session.keys.forNewTask(taskId, session.executor, session.capabilities) : undefined;
  const { envelope } = await sealTaskRequest(session.identity, session.executor, { taskId, taskType, payload, sealing });
  // No wait: the reply comes as soon as the task is confirmed, refused or questioned; Watch shows the rest.
  const response = await p2p.send({ envelope });
  const expect = { executor: session.executor, receiver: session.identity.agentId, taskId, checkTime: true, confidential: options.confidential };
  const reply = (await verifyMessage(session.keys, session.executor, response.reply?.envelope, expect)).verification;
  if (!reply.ok) throw new ReplyNotVerified(reply.reason);
  return { taskId, reply, task: response.task };
}

/** The task a message is about: its id, and whether it is confidential (its view carries `confidential`). */
export type TaskRef = Pick<Task, "taskId" | "confidential">;

const isConfidential = (task: TaskRef) => task.confidential !== undefined;

export function cancelTask(session: Session, task: TaskRef, reason: string): Promise<SendOutcome> {
  const { taskId } = task;
  return send(session, MessageType.TASK_CANCEL, TaskCancelPayloadSchema, create(TaskCancelPayloadSchema, { taskId, reason }), taskId, undefined, isConfidential(task));
}

export function provideInfo(session: Session, task: TaskRef, fields: JsonObject, note: string): Promise<SendOutcome> {
  const { taskId } = task;
  return send(session, MessageType.TASK_INFO_PROVIDED, TaskInfoProvidedPayloadSchema, create(TaskInfoProvidedPayloadSchema, { taskId, fields, note }), taskId, undefined, isConfidential(task));
}

/** The requester's task_ack of a need_human: a human has taken the decision up (need_human → human_deciding). */
export function takeUpDecision(session: Session, task: TaskRef): Promise<SendOutcome> {
  const { taskId } = task;
  return send(session, MessageType.TASK_ACK, TaskAckPayloadSchema, create(TaskAckPayloadSchema, { taskId }), taskId, undefined, isConfidential(task));
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
export function decide(session: Session, task: TaskRef, requesterId: string, input: DecisionInput): Promise<SendOutcome> {
  const { taskId } = task;
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
  return send(session, MessageType.HUMAN_DECISION, HumanDecisionPayloadSchema, payload, taskId, requesterId, isConfidential(task));
}

/** "p2p:task_ack ✓" for a verified reply. */
export function replyLine(outcome: SendOutcome): string {
  return outcome.reply?.ok ? `${wireName(outcome.reply.type)} ✓` : "no reply";
}
