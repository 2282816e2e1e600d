// The 17 p2p:* message types, the registry's two and the group protocol's
// a2n:* ones as data: the protocol spelling, the payload message that
// travels with each, the Payload oneof case that shows it decoded, and
// which side may send it.
import type { DescMessage } from "@bufbuild/protobuf";
import { MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import {
  AckPayloadSchema,
  CapabilityQueryPayloadSchema,
  CapabilityResponsePayloadSchema,
  HeartbeatPayloadSchema,
  HumanDecisionPayloadSchema,
  NackPayloadSchema,
  type Payload,
  TaskAckPayloadSchema,
  TaskCancelPayloadSchema,
  TaskCompletePayloadSchema,
  TaskConfirmPayloadSchema,
  TaskFailedPayloadSchema,
  TaskInfoProvidedPayloadSchema,
  TaskNeedHumanPayloadSchema,
  TaskNeedInfoPayloadSchema,
  TaskRejectPayloadSchema,
  TaskRequestPayloadSchema,
  TaskStatusUpdatePayloadSchema,
} from "../../gen/synapse/v1/payloads_pb.js";
import { AgentDeregistrationPayloadSchema, AgentRegistrationPayloadSchema } from "../../gen/synapse/v1/registry_pb.js";
import {
  GroupCreatePayloadSchema,
  GroupDissolvePayloadSchema,
  GroupEventPayloadSchema,
  GroupTaskAnswerPayloadSchema,
  GroupTaskCancelPayloadSchema,
  GroupTaskSubmitPayloadSchema,
  MemberApprovePayloadSchema,
  MemberInvitePayloadSchema,
  MemberJoinPayloadSchema,
  MemberLeavePayloadSchema,
  MemberRemovePayloadSchema,
  MemberRolePayloadSchema,
  VoteCastPayloadSchema,
  VoteClosePayloadSchema,
  VoteStartPayloadSchema,
} from "../../gen/synapse/v1/a2n_pb.js";

/**
 * Who may send a message type: the requester, the executor, or either; for
 * a2n:* messages, "group" (the sender's role in the group decides, see
 * src/group) or "host" (a group's own event, never sent).
 */
export type SenderRole = "requester" | "executor" | "either" | "group" | "host";

/** The case of `synapse.v1.Payload`'s oneof that shows a message type's payload decoded. */
export type PayloadCase = NonNullable<Payload["body"]["case"]>;

/** Facts about one message type. */
export interface MessageTypeInfo {
  /** The message type. */
  readonly type: MessageType;
  /** The protocol spelling, "p2p:task_request". */
  readonly wireName: string;
  /** The payload message it carries. */
  readonly payloadSchema: DescMessage;
  /** Where the decoded view shows the payload. */
  readonly payloadCase: PayloadCase;
  /** Who may send it. */
  readonly sender: SenderRole;
  /** True when the message concerns one task (Header.task_id required). */
  readonly taskScoped: boolean;
}

/** Registry messages (100 and up) are spelled "registry:…", group messages (200 and up) "a2n:…", the rest "p2p:…". */
function spell(type: MessageType): string {
  const name = MessageType[type].toLowerCase();
  if (name.startsWith("registry_")) return `registry:${name.slice("registry_".length)}`;
  if (name.startsWith("a2n_")) return `a2n:${name.slice("a2n_".length)}`;
  return `p2p:${name}`;
}

function info(
  type: MessageType,
  payloadSchema: DescMessage,
  payloadCase: PayloadCase,
  sender: SenderRole,
  taskScoped: boolean,
): MessageTypeInfo {
  return { type, wireName: spell(type), payloadSchema, payloadCase, sender, taskScoped };
}

const table: readonly MessageTypeInfo[] = [
  info(MessageType.TASK_REQUEST, TaskRequestPayloadSchema, "taskRequest", "requester", true),
  info(MessageType.TASK_CONFIRM, TaskConfirmPayloadSchema, "taskConfirm", "executor", true),
  info(MessageType.TASK_REJECT, TaskRejectPayloadSchema, "taskReject", "executor", true),
  info(MessageType.TASK_NEED_INFO, TaskNeedInfoPayloadSchema, "taskNeedInfo", "executor", true),
  info(MessageType.TASK_INFO_PROVIDED, TaskInfoProvidedPayloadSchema, "taskInfoProvided", "requester", true),
  info(MessageType.TASK_STATUS_UPDATE, TaskStatusUpdatePayloadSchema, "taskStatusUpdate", "executor", true),
  info(MessageType.TASK_COMPLETE, TaskCompletePayloadSchema, "taskComplete", "executor", true),
  info(MessageType.TASK_FAILED, TaskFailedPayloadSchema, "taskFailed", "executor", true),
  info(MessageType.TASK_CANCEL, TaskCancelPayloadSchema, "taskCancel", "requester", true),
  info(MessageType.TASK_ACK, TaskAckPayloadSchema, "taskAck", "either", true),
  info(MessageType.ACK, AckPayloadSchema, "ack", "either", false),
  info(MessageType.NACK, NackPayloadSchema, "nack", "either", false),
  info(MessageType.HEARTBEAT, HeartbeatPayloadSchema, "heartbeat", "either", false),
  info(MessageType.CAPABILITY_QUERY, CapabilityQueryPayloadSchema, "capabilityQuery", "either", false),
  info(MessageType.CAPABILITY_RESPONSE, CapabilityResponsePayloadSchema, "capabilityResponse", "either", false),
  info(MessageType.TASK_NEED_HUMAN, TaskNeedHumanPayloadSchema, "taskNeedHuman", "executor", true),
  info(MessageType.HUMAN_DECISION, HumanDecisionPayloadSchema, "humanDecision", "requester", true),
  info(MessageType.REGISTRY_REGISTER, AgentRegistrationPayloadSchema, "registryRegister", "either", false),
  info(MessageType.REGISTRY_DEREGISTER, AgentDeregistrationPayloadSchema, "registryDeregister", "either", false),
  info(MessageType.A2N_GROUP_CREATE, GroupCreatePayloadSchema, "a2nGroupCreate", "group", false),
  info(MessageType.A2N_GROUP_DISSOLVE, GroupDissolvePayloadSchema, "a2nGroupDissolve", "group", false),
  info(MessageType.A2N_MEMBER_INVITE, MemberInvitePayloadSchema, "a2nMemberInvite", "group", false),
  info(MessageType.A2N_MEMBER_JOIN, MemberJoinPayloadSchema, "a2nMemberJoin", "group", false),
  info(MessageType.A2N_MEMBER_APPROVE, MemberApprovePayloadSchema, "a2nMemberApprove", "group", false),
  info(MessageType.A2N_MEMBER_LEAVE, MemberLeavePayloadSchema, "a2nMemberLeave", "group", false),
  info(MessageType.A2N_MEMBER_REMOVE, MemberRemovePayloadSchema, "a2nMemberRemove", "group", false),
  info(MessageType.A2N_GROUP_TASK_SUBMIT, GroupTaskSubmitPayloadSchema, "a2nGroupTaskSubmit", "group", true),
  info(MessageType.A2N_GROUP_TASK_ANSWER, GroupTaskAnswerPayloadSchema, "a2nGroupTaskAnswer", "group", true),
  info(MessageType.A2N_GROUP_TASK_CANCEL, GroupTaskCancelPayloadSchema, "a2nGroupTaskCancel", "group", true),
  info(MessageType.A2N_VOTE_START, VoteStartPayloadSchema, "a2nVoteStart", "group", false),
  info(MessageType.A2N_VOTE_CAST, VoteCastPayloadSchema, "a2nVoteCast", "group", false),
  info(MessageType.A2N_VOTE_CLOSE, VoteClosePayloadSchema, "a2nVoteClose", "group", false),
  info(MessageType.A2N_GROUP_EVENT, GroupEventPayloadSchema, "a2nGroupEvent", "host", false),
  info(MessageType.A2N_MEMBER_ROLE, MemberRolePayloadSchema, "a2nMemberRole", "group", false),
];

const byType = new Map(table.map((entry) => [entry.type, entry]));
const byWireName = new Map(table.map((entry) => [entry.wireName, entry]));

export const ALL_MESSAGE_TYPES: readonly MessageTypeInfo[] = table;

export function messageTypeInfo(type: MessageType): MessageTypeInfo | undefined {
  return byType.get(type);
}

/** Parses "p2p:task_request" (or "task_request", "MESSAGE_TYPE_TASK_REQUEST", "registry:register", "a2n:vote_cast"). */
export function parseMessageType(name: string): MessageTypeInfo | undefined {
  const lower = name.trim().toLowerCase();
  if (lower.startsWith("message_type_")) return table.find((entry) => MessageType[entry.type].toLowerCase() === lower.slice("message_type_".length));
  if (lower.includes(":")) return byWireName.get(lower);
  return byWireName.get(`p2p:${lower}`) ?? byWireName.get(`registry:${lower}`);
}

/** A message type as the protocol spells it: `MessageType.TASK_REQUEST` is `"p2p:task_request"`. */
export function wireName(type: MessageType): string {
  return byType.get(type)?.wireName ?? `p2p:unknown(${type})`;
}
