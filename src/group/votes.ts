// VotingHandler's rules (docs/PROTOCOL.md §7.6): starting a vote, taking
// signed ballots (one per eligible voter; a second is refused), closing by
// deadline, by the last ballot, by a coordinator or by dissolving the
// group, each close recorded with its final count. Pure functions from the
// vote now and a verified message to the vote after it and its events.
import { clone, create } from "@bufbuild/protobuf";
import { timestampFromMs, timestampMs } from "@bufbuild/protobuf/wkt";
import { ConsensusRule, GroupEventKind, GroupRole, VoteCloseReason, type VoteCastPayload, type VoteStartPayload } from "../../gen/synapse/v1/a2n_pb.js";
import { VoteSchema, VoteState, type Group, type Vote } from "../../gen/synapse/v1/group_pb.js";
import type { OpenedEnvelope } from "../envelope/open.js";
import { signedMessage } from "../envelope/view.js";
import { clip } from "../protocol/errors.js";
import { causedBy, type EventDraft } from "./log.js";
import { alreadyExists, checkId, checkText, denied, invalidParams, LIMITS, notFound, refusedNow, requireActive, requireMember, takesPart, tooMany } from "./rules.js";
import { countVote, DEFAULT_THRESHOLD, effectiveQuorum } from "./tally.js";

export interface VoteChange {
  vote: Vote;
  events: EventDraft[];
}

export const voteTerms = (vote: Vote): VoteStartPayload => vote.start!.view!.payload!.body.value as VoteStartPayload;
const ballotOf = (ballot: Vote["ballots"][number]) => ({
  agentId: ballot.view!.header!.sender!.agentId,
  messageId: ballot.view!.header!.messageId,
  ...(ballot.view!.payload!.body.value as VoteCastPayload),
});

/** The vote's count now: final when `closedReason` is given. */
export function tallyOf(vote: Vote, closedReason?: VoteCloseReason) {
  const terms = voteTerms(vote);
  return countVote({
    voteId: vote.voteId,
    options: terms.options,
    rule: terms.rule,
    threshold: terms.threshold,
    quorum: effectiveQuorum(terms.quorum, vote.eligible.length),
    eligible: vote.eligible,
    ballots: vote.ballots.map(ballotOf),
    final: closedReason !== undefined,
    closedReason: closedReason ?? VoteCloseReason.UNSPECIFIED,
  });
}

function checkTerms(payload: VoteStartPayload, sentMs: number, nowMs: number): void {
  checkId("vote_id", payload.voteId);
  checkText("question", payload.question);
  if (payload.options.length < 2 || payload.options.length > LIMITS.options) throw invalidParams(`a vote has 2 to ${LIMITS.options} options`, { field: "options" });
  if (new Set(payload.options).size !== payload.options.length || payload.options.some((option) => option === "" || option.length > LIMITS.optionChars)) {
    throw invalidParams(`options must be distinct, non-empty and at most ${LIMITS.optionChars} characters`, { field: "options" });
  }
  if (payload.rule === ConsensusRule.UNSPECIFIED || ConsensusRule[payload.rule] === undefined) throw invalidParams("rule is required", { field: "rule" });
  const threshold = payload.threshold ?? DEFAULT_THRESHOLD;
  if (threshold.denominator === 0 || threshold.numerator * 2 <= threshold.denominator || threshold.numerator > threshold.denominator) {
    throw invalidParams("threshold must be more than 1/2 and at most 1", { field: "threshold" });
  }
  if (payload.deadline === undefined) throw invalidParams("deadline is required", { field: "deadline" });
  const deadline = timestampMs(payload.deadline);
  if (deadline <= nowMs || deadline > sentMs + LIMITS.voteHorizonMs) throw invalidParams("deadline must be in the future and within 30 days of sent_at", { field: "deadline" });
}

export function startVote(group: Group, opened: OpenedEnvelope, existing: Vote | undefined, openVotes: number, nowMs: number): VoteChange {
  const payload = opened.payload as VoteStartPayload;
  requireActive(group);
  const starter = requireMember(group, opened.header.sender!.agentId);
  if (!takesPart(starter)) throw denied("observer", "observers do not start votes");
  checkTerms(payload, opened.header.sentAt ? timestampMs(opened.header.sentAt) : nowMs, nowMs);
  if (existing !== undefined) throw alreadyExists("vote", payload.voteId);
  if (openVotes >= LIMITS.open) throw tooMany(`a group has at most ${LIMITS.open} open votes`);
  const voters = group.members.filter(takesPart);
  let eligible = voters;
  if (payload.eligibleVoters.length > 0) {
    if (new Set(payload.eligibleVoters).size !== payload.eligibleVoters.length) throw invalidParams("eligible_voters has repeats", { field: "eligible_voters" });
    eligible = payload.eligibleVoters.map((agentId) => {
      const voter = voters.find((member) => member.agent?.agentId === agentId);
      if (voter === undefined) throw invalidParams(`${clip(agentId)} is not a coordinator or member of the group`, { field: "eligible_voters" });
      return voter;
    });
  }
  if (payload.quorum > eligible.length) throw invalidParams(`quorum ${payload.quorum} is more than the ${eligible.length} eligible voters`, { field: "quorum" });
  const vote = create(VoteSchema, {
    voteId: payload.voteId,
    groupId: group.groupId,
    startedBy: opened.header.sender,
    start: signedMessage(opened.envelope, opened.header, opened.payload),
    state: VoteState.OPEN,
    eligible: eligible.map((member) => ({ agentId: member.agent!.agentId, keyId: member.agent!.keyId, weight: member.weight, publicKey: member.publicKey })),
    createdAt: timestampFromMs(nowMs),
    deadline: payload.deadline,
    question: payload.question,
    options: payload.options,
    rule: payload.rule,
  });
  vote.tally = tallyOf(vote);
  return { vote, events: [{ kind: GroupEventKind.VOTE_STARTED, ...causedBy(opened), subjectId: vote.voteId }] };
}

function checkBallot(terms: VoteStartPayload, ballot: VoteCastPayload): void {
  if (ballot.abstain) {
    if (ballot.choice !== "" || ballot.ranking.length > 0) throw invalidParams("an abstention names no choice and no ranking", { field: "abstain" });
    return;
  }
  if (terms.rule === ConsensusRule.RANKED) {
    if (ballot.choice !== "" || ballot.ranking.length === 0) throw invalidParams("a ranked vote takes a ranking (and no choice)", { field: "ranking" });
    if (new Set(ballot.ranking).size !== ballot.ranking.length) throw invalidParams("a ranking names each option at most once", { field: "ranking" });
    const unknown = ballot.ranking.find((option) => !terms.options.includes(option));
    if (unknown !== undefined) throw invalidParams(`${JSON.stringify(clip(unknown))} is not an option`, { field: "ranking" });
    return;
  }
  if (ballot.ranking.length > 0) throw invalidParams("only ranked votes take a ranking", { field: "ranking" });
  if (!terms.options.includes(ballot.choice)) throw invalidParams(`${JSON.stringify(clip(ballot.choice))} is not an option`, { field: "choice" });
}

function closed(vote: Vote, reason: VoteCloseReason, nowMs: number, cause?: OpenedEnvelope): EventDraft {
  vote.state = VoteState.CLOSED;
  vote.closedAt = timestampFromMs(nowMs);
  vote.tally = tallyOf(vote, reason);
  return { kind: GroupEventKind.VOTE_TALLIED, ...(cause ? causedBy(cause) : {}), subjectId: vote.voteId, tally: vote.tally };
}

export function castBallot(group: Group, current: Vote | undefined, opened: OpenedEnvelope, nowMs: number): VoteChange {
  const payload = opened.payload as VoteCastPayload;
  requireActive(group);
  const sender = opened.header.sender!;
  requireMember(group, sender.agentId);
  if (current === undefined) throw notFound("vote", payload.voteId, group.groupId);
  const terms = voteTerms(current);
  if (current.state !== VoteState.OPEN || (current.deadline !== undefined && timestampMs(current.deadline) <= nowMs)) {
    throw refusedNow("vote_closed", `vote ${clip(current.voteId)} is closed`);
  }
  const voter = current.eligible.find((entry) => entry.agentId === sender.agentId);
  if (voter === undefined) throw denied("not_eligible", `${clip(sender.agentId)} is not an eligible voter of vote ${clip(current.voteId)}`);
  if (voter.keyId !== sender.keyId) throw denied("voter_key", `ballots of ${clip(sender.agentId)} are signed with key ${voter.keyId}`);
  const earlier = current.ballots.find((ballot) => ballot.view?.header?.sender?.agentId === sender.agentId);
  if (earlier !== undefined) {
    throw refusedNow("one_ballot", `${clip(sender.agentId)} has voted in ${clip(current.voteId)} already; a ballot cannot be replaced`, {
      first_ballot: earlier.view!.header!.messageId,
    });
  }
  checkBallot(terms, payload);
  const vote = clone(VoteSchema, current);
  vote.ballots.push(signedMessage(opened.envelope, opened.header, opened.payload));
  const events: EventDraft[] = [{ kind: GroupEventKind.BALLOT_CAST, ...causedBy(opened), subjectId: vote.voteId }];
  if (vote.ballots.length === vote.eligible.length) events.push(closed(vote, VoteCloseReason.ALL_VOTED, nowMs));
  else vote.tally = tallyOf(vote);
  return { vote, events };
}

export function closeVote(group: Group, current: Vote | undefined, opened: OpenedEnvelope, voteId: string, nowMs: number): VoteChange {
  requireActive(group);
  const sender = requireMember(group, opened.header.sender!.agentId);
  if (current === undefined) throw notFound("vote", voteId, group.groupId);
  if (sender.role !== GroupRole.COORDINATOR && current.startedBy?.agentId !== sender.agent?.agentId) {
    throw denied("coordinator_or_starter", "only a coordinator or the member who started a vote may close it");
  }
  if (current.state !== VoteState.OPEN) throw refusedNow("vote_closed", `vote ${clip(current.voteId)} is closed`);
  const vote = clone(VoteSchema, current);
  return { vote, events: [closed(vote, VoteCloseReason.CLOSED, nowMs, opened)] };
}

/** Closes a vote whose deadline passed, or (dissolving) any open vote. */
export function closeBy(current: Vote, reason: VoteCloseReason.DEADLINE | VoteCloseReason.DISSOLVED, nowMs: number, cause?: OpenedEnvelope): VoteChange {
  const vote = clone(VoteSchema, current);
  return { vote, events: [closed(vote, reason, nowMs, cause)] };
}
