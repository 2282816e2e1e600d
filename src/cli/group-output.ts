// How groups, their events, group tasks and votes look on a terminal and as
// JSON (proto JSON: lowerCamelCase names, enums by name).
import { toJson, type JsonValue } from "@bufbuild/protobuf";
import {
  GroupEventKind,
  GroupEventPayloadSchema,
  GroupRole,
  GroupTaskState,
  GroupTaskStrategy,
  VoteOutcome,
  type VoteTally,
} from "../../gen/synapse/v1/a2n_pb.js";
import { HeaderSchema } from "../../gen/synapse/v1/envelope_pb.js";
import { GroupSchema, GroupStatus, GroupTaskSchema, PendingKind, VoteSchema, VoteState, type Group, type GroupTask, type Vote } from "../../gen/synapse/v1/group_pb.js";
import type { GroupSendResult, VerifiedGroupEvent } from "../client/group-client.js";
import { decodeUnverified } from "../envelope/view.js";
import { describeTally } from "../group/tally.js";
import { fromValue } from "../protocol/json-values.js";
import { stateName } from "../protocol/state-machine.js";
import { wireName } from "../protocol/message-types.js";

const lower = (name: string | undefined) => (name ?? "unspecified").toLowerCase();
export const roleLabel = (role: GroupRole) => lower(GroupRole[role]);
export const taskStateLabel = (state: GroupTaskState) => lower(GroupTaskState[state]);

export function eventJson(event: VerifiedGroupEvent): JsonValue {
  return { sequence: event.sequence, header: toJson(HeaderSchema, event.header), payload: toJson(GroupEventPayloadSchema, event.payload) };
}

export function sendJson(result: GroupSendResult): JsonValue {
  return {
    reply: eventJson(result.reply),
    group: result.group ? toJson(GroupSchema, result.group) : null,
    groupTask: result.groupTask ? toJson(GroupTaskSchema, result.groupTask) : null,
    vote: result.vote ? toJson(VoteSchema, result.vote) : null,
  };
}

export function describeGroup(group: Group): string[] {
  const lines = [`group ${group.groupId}${group.name ? ` (${group.name})` : ""}: ${group.status === GroupStatus.DISSOLVED ? "dissolved" : "active"}, hosted by ${group.host?.agentId}, event ${group.lastSequence}`];
  for (const member of group.members) {
    const endpoint = member.endpointUrl ? ` at ${member.endpointUrl}` : "";
    lines.push(`  ${roleLabel(member.role).padEnd(11)} ${member.agent?.agentId} weight ${member.weight}${endpoint}`);
  }
  for (const pending of group.pending) {
    const kind = pending.kind === PendingKind.INVITATION ? "invited" : "asks to join";
    lines.push(`  ${kind.padEnd(11)} ${pending.agent?.agentId} as ${roleLabel(pending.role)} (${pending.kind === PendingKind.INVITATION ? "invitation" : "request"} ${pending.messageId})`);
  }
  return lines;
}

/** What an event's cause says, in a few words. */
function causeWords(event: VerifiedGroupEvent): string {
  const cause = event.payload.cause;
  if (cause === undefined) return "";
  try {
    const { header } = decodeUnverified(cause);
    return ` (${wireName(header.messageType)} from ${header.sender?.agentId})`;
  } catch {
    return "";
  }
}

export function describeGroupEvent(event: VerifiedGroupEvent): string {
  const payload = event.payload;
  const kind = lower(GroupEventKind[payload.kind]);
  const parts = [`#${event.sequence} ${kind}`];
  if (payload.member?.agent) parts.push(`${payload.member.agent.agentId}${payload.member.role ? ` as ${roleLabel(payload.member.role)}` : ""}`);
  if (payload.subtask) parts.push(`${payload.subtask.subtaskId} at ${payload.subtask.agentId}`);
  if (payload.memberEvent) {
    try {
      parts.push(wireName(decodeUnverified(payload.memberEvent).header.messageType));
    } catch {
      parts.push("(unreadable member event)");
    }
  }
  if (payload.subjectId && !payload.subtask) parts.push(payload.subjectId);
  if (payload.groupTaskState) parts.push(`-> ${taskStateLabel(payload.groupTaskState)}`);
  if (payload.tally) parts.push(describeTally(payload.tally));
  if (payload.reason) parts.push(`: ${payload.reason}`);
  return parts.join(" ") + causeWords(event);
}

/** A group task in a few lines; the answer hints name the host at `url`. */
export function describeGroupTask(task: GroupTask, url: string): string[] {
  const lines = [
    `group task ${task.groupTaskId} (${task.taskType}, ${lower(GroupTaskStrategy[task.strategy])}): ${taskStateLabel(task.state)}, ${task.completed} of ${task.required} done`,
  ];
  for (const subtask of task.subtasks) {
    const ref = subtask.ref!;
    const state = subtask.lostReason ? `stopped: ${subtask.lostReason}` : stateName(subtask.state);
    lines.push(`  ${ref.subtaskId} at ${ref.agentId}: ${state}${subtask.progress ? ` ${subtask.progress}%` : ""}`);
    if (!subtask.finished && subtask.pendingInfo) {
      lines.push(`    needs information: ${subtask.pendingInfo.question} (${subtask.pendingInfo.missingFields.map((field) => field.field).join(", ")})`);
      lines.push(`    answer with: synapse group task ${url} ${task.groupId} --task-id ${task.groupTaskId} --answer ${ref.subtaskId} --set FIELD=VALUE`);
    }
    if (!subtask.finished && subtask.pendingDecision) {
      lines.push(`    needs a decision: ${subtask.pendingDecision.reason?.message ?? ""}`);
      lines.push(`    answer with: synapse group task ${url} ${task.groupId} --task-id ${task.groupTaskId} --answer ${ref.subtaskId} --approve | --modify --set FIELD=VALUE | --reject`);
    }
  }
  for (const output of task.outputs) lines.push(`  output of ${output.agentId} (slot ${output.slot}): ${JSON.stringify(fromValue(output.output))}`);
  if (task.reason) lines.push(`  reason: ${task.reason}`);
  return lines;
}

export function describeVote(vote: Vote, tally: VoteTally | undefined): string[] {
  const lines = [`vote ${vote.voteId}: ${vote.question} [${vote.options.join(" | ")}] ${lower(VoteState[vote.state])}`];
  if (tally) {
    lines.push(`  ${describeTally(tally)}`);
    for (const count of tally.counts) lines.push(`  ${count.option}: ${count.votes}`);
    for (const round of tally.rounds) {
      lines.push(`  round ${round.round}: ${round.counts.map((c) => `${c.option} ${c.votes}`).join(", ")}${round.eliminated ? `; eliminated ${round.eliminated}` : ""}`);
    }
  }
  return lines;
}

/** Exit status of a group task: 0 completed or running, 1 failed or cancelled, 3 waiting for an answer. */
export function groupTaskExit(task: GroupTask | undefined): number {
  if (task === undefined) return 0;
  if (task.state === GroupTaskState.WAITING) return 3;
  return task.state === GroupTaskState.FAILED || task.state === GroupTaskState.CANCELLED ? 1 : 0;
}

/** Exit status of a count: 0 decided, 1 closed without a decision, 3 still open. */
export function tallyExit(tally: VoteTally | undefined): number {
  if (tally === undefined || !tally.final) return 3;
  return tally.outcome === VoteOutcome.DECIDED ? 0 : 1;
}
