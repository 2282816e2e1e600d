// Group protocol values for people: roles, strategies, states, rules and
// outcomes as lower-case words, and one line for what a group event says
// (the log rows of history.ts use it). No DOM here (Node tests use it).
import { ConsensusRule, GroupEventKind, GroupRole, GroupTaskState, GroupTaskStrategy, VoteCloseReason, VoteOutcome, type GroupEventPayload, type VoteTally } from "../../gen/synapse/v1/a2n_pb.js";
import { GroupStatus, VoteState } from "../../gen/synapse/v1/group_pb.js";

/** An enum value's name without its prefix, lower case, underscores as spaces: "no majority". */
export function word(names: Record<number, string>, value: number, prefix: string): string {
  return (names[value] ?? String(value)).replace(prefix, "").toLowerCase().replace(/_/g, " ");
}

export const roleWord = (role: GroupRole) => word(GroupRole, role, "");
export const strategyWord = (strategy: GroupTaskStrategy) => word(GroupTaskStrategy, strategy, "");
export const ruleWord = (rule: ConsensusRule) => word(ConsensusRule, rule, "");
export const groupStatusWord = (status: GroupStatus) => word(GroupStatus, status, "");
export const voteStateWord = (state: VoteState) => word(VoteState, state, "");
export const closeReasonWord = (reason: VoteCloseReason) => word(VoteCloseReason, reason, "");

export const groupTaskStateWord = (state: GroupTaskState) => word(GroupTaskState, state, "");

/** The outcome of a count in words: "decided: yes", "tie: a, b", "no quorum". */
export function outcomeLine(tally: VoteTally): string {
  const outcome = word(VoteOutcome, tally.outcome, "");
  if (tally.outcome === VoteOutcome.DECIDED) return `decided: ${tally.winner}`;
  if (tally.outcome === VoteOutcome.TIE) return `tie: ${tally.tied.join(", ")}`;
  return outcome;
}

/** What a group event says, in one line: its kind and what it is about. */
export function groupEventSummary(event: GroupEventPayload): string {
  const kind = word(GroupEventKind, event.kind, "");
  const who = event.member?.agent?.agentId;
  const parts: string[] = [kind];
  if (who) parts.push(`${who} (${roleWord(event.member!.role)})`);
  if (event.subtask) parts.push(`${event.subtask.groupTaskId} → ${event.subtask.agentId} #${event.subtask.slot}.${event.subtask.attempt}`);
  else if (event.subjectId) parts.push(event.subjectId);
  if (event.groupTaskState !== GroupTaskState.UNSPECIFIED) parts.push(word(GroupTaskState, event.groupTaskState, ""));
  if (event.tally) parts.push(outcomeLine(event.tally));
  if (event.reason) parts.push(event.reason);
  return parts.join(" · ");
}
