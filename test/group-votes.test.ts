// Votes (VotingHandler) through real `synapse serve` processes: every
// consensus rule with its ties, the quorum, abstentions, the deadline, one
// ballot per voter, forged ballots and ballots from outside refused, and a
// count recomputed here from the published signed ballots alone, with
// node:crypto and a counting written out independently of the host's.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ConsensusRule,
  GroupEventKind,
  GroupRole,
  VoteCastPayloadSchema,
  VoteCloseReason,
  VoteOutcome,
  VoteStartPayloadSchema,
} from "../gen/synapse/v1/a2n_pb.js";
import { EnvelopeSchema, HeaderSchema, MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { GroupService, VoteState } from "../gen/synapse/v1/group_pb.js";
import type { AgentIdentity } from "../src/agent/identity.js";
import type { GroupClient } from "../src/client/group-client.js";
import { seal } from "../src/envelope/seal.js";
import { findErrorDetail } from "../src/protocol/errors.js";
import { inviteAll, startGroupAgents, stopAll, userClient, type GroupAgent } from "./helpers/group-agents.js";
import { derivedId, verifies } from "./helpers/independent-verify.js";

let agents: GroupAgent[];
let host: GroupAgent;
let a: GroupAgent;
let b: GroupAgent;
let c: GroupAgent;
let chair: GroupClient & { identity: AgentIdentity };
const later = () => new Date(Date.now() + 60_000);
let voteNumber = 0;

beforeAll(async () => {
  agents = await startGroupAgents(4);
  [host, a, b, c] = agents as [GroupAgent, GroupAgent, GroupAgent, GroupAgent];
  chair = await userClient(host.url);
  await chair.create("council");
  // Weights for the weighted rule: a 4, b 1, c 1, the chair 1.
  await inviteAll(chair, "council", [a, b, c], [4, 1, 1]);
}, 30_000);
afterAll(async () => stopAll(agents));

async function refusal(call: Promise<unknown>): Promise<[Code, string | undefined, unknown]> {
  const error = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error, "the call should have been refused").toBeInstanceOf(ConnectError);
  const detail = findErrorDetail(error);
  return [(error as ConnectError).code, detail?.protocolCode, (detail?.details as { rule?: unknown } | undefined)?.rule];
}

type Ballot = { choice: string } | { ranking: string[] } | { abstain: true };

/** Starts a vote, has each voter cast, and returns the vote as it stands after the last ballot. */
async function runVote(rule: ConsensusRule, ballots: Array<[GroupClient, Ballot]>, extra: { options?: string[]; voters?: string[]; quorum?: number; threshold?: { numerator: number; denominator: number } } = {}) {
  const voteId = `vote-${++voteNumber}`;
  await chair.startVote("council", { voteId, question: "which?", options: extra.options ?? ["yes", "no", "maybe"], rule, eligibleVoters: extra.voters, quorum: extra.quorum, threshold: extra.threshold, deadline: later() });
  let vote;
  for (const [voter, ballot] of ballots) vote = (await voter.cast("council", voteId, ballot)).vote;
  return { voteId, vote: vote! };
}

const everyone = () => [chair, a.client, b.client, c.client];
const ids = (...clients: GroupClient[]) => clients.map((client) => client.agentId);

describe("consensus rules", () => {
  it("majority: decided, and a tie", async () => {
    const [w, x, y, z] = everyone();
    const decided = await runVote(ConsensusRule.MAJORITY, [[w!, { choice: "yes" }], [x!, { choice: "yes" }], [y!, { choice: "yes" }], [z!, { choice: "no" }]]);
    expect(decided.vote.tally).toMatchObject({ final: true, closedReason: VoteCloseReason.ALL_VOTED, outcome: VoteOutcome.DECIDED, winner: "yes" });
    const tie = await runVote(ConsensusRule.MAJORITY, [[w!, { choice: "yes" }], [x!, { choice: "no" }], [y!, { choice: "yes" }], [z!, { choice: "no" }]]);
    expect(tie.vote.tally).toMatchObject({ outcome: VoteOutcome.TIE, tied: ["yes", "no"], winner: "" });
  });

  it("supermajority: 2/3 by default, a configured 3/4 not reached", async () => {
    const [w, x, y] = everyone();
    const voters = ids(w!, x!, y!);
    const two = await runVote(ConsensusRule.SUPERMAJORITY, [[w!, { choice: "yes" }], [x!, { choice: "yes" }], [y!, { choice: "no" }]], { voters });
    expect(two.vote.tally).toMatchObject({ outcome: VoteOutcome.DECIDED, winner: "yes" });
    const strict = await runVote(ConsensusRule.SUPERMAJORITY, [[w!, { choice: "yes" }], [x!, { choice: "yes" }], [y!, { choice: "no" }]], { voters, threshold: { numerator: 3, denominator: 4 } });
    expect(strict.vote.tally).toMatchObject({ outcome: VoteOutcome.NO_MAJORITY });
  });

  it("unanimous: one dissent breaks it; an abstention does not", async () => {
    const [w, x, y, z] = everyone();
    const agreed = await runVote(ConsensusRule.UNANIMOUS, [[w!, { choice: "yes" }], [x!, { choice: "yes" }], [y!, { abstain: true }], [z!, { choice: "yes" }]]);
    expect(agreed.vote.tally).toMatchObject({ outcome: VoteOutcome.DECIDED, winner: "yes", abstentions: 1 });
    const broken = await runVote(ConsensusRule.UNANIMOUS, [[w!, { choice: "yes" }], [x!, { choice: "yes" }], [y!, { choice: "no" }], [z!, { choice: "yes" }]]);
    expect(broken.vote.tally).toMatchObject({ outcome: VoteOutcome.NO_MAJORITY });
  });

  it("weighted: a heavy voter outweighs three light ones that a head count would follow", async () => {
    const [w, x, y, z] = everyone();
    const ballots: Array<[GroupClient, Ballot]> = [[w!, { choice: "no" }], [x!, { choice: "yes" }], [y!, { choice: "no" }], [z!, { choice: "no" }]];
    expect((await runVote(ConsensusRule.WEIGHTED, ballots)).vote.tally).toMatchObject({ outcome: VoteOutcome.DECIDED, winner: "yes", counted: 7n });
    expect((await runVote(ConsensusRule.MAJORITY, ballots)).vote.tally).toMatchObject({ outcome: VoteOutcome.DECIDED, winner: "no" });
  });

  it("ranked: instant runoff eliminates, transfers, and ends in a tie when two are level", async () => {
    const [w, x, y, z] = everyone();
    // Round 1: yes 1, no 2, maybe 1 -> tie for fewest, maybe (listed last) out; its ballot goes to yes. Round 2: yes 2, no 2: a tie.
    const tie = await runVote(ConsensusRule.RANKED, [[w!, { ranking: ["yes"] }], [x!, { ranking: ["no"] }], [y!, { ranking: ["no", "yes"] }], [z!, { ranking: ["maybe", "yes"] }]]);
    expect(tie.vote.tally).toMatchObject({ outcome: VoteOutcome.TIE, tied: ["yes", "no"] });
    expect(tie.vote.tally?.rounds.map((r) => r.eliminated)).toEqual(["maybe", ""]);
    const decided = await runVote(ConsensusRule.RANKED, [[w!, { ranking: ["maybe", "yes"] }], [x!, { ranking: ["no"] }], [y!, { ranking: ["yes"] }], [z!, { ranking: ["yes"] }]]);
    expect(decided.vote.tally).toMatchObject({ outcome: VoteOutcome.DECIDED, winner: "yes" });
    expect(decided.vote.tally?.rounds.map((r) => r.counts.map((count) => Number(count.votes)))).toEqual([
      [2, 1, 1],
      [3, 1],
    ]);
  });

  it("quorum not reached: closed early by the chair with too few ballots", async () => {
    const { voteId } = await runVote(ConsensusRule.MAJORITY, [[a.client, { choice: "yes" }]]);
    const closed = await chair.closeVote("council", voteId, "enough waiting");
    expect(closed.vote?.tally).toMatchObject({ final: true, closedReason: VoteCloseReason.CLOSED, outcome: VoteOutcome.NO_QUORUM, quorum: 3, ballots: 1 });
    // A member that did not start it may not close it.
    const other = await runVote(ConsensusRule.MAJORITY, []);
    expect(await refusal(b.client.closeVote("council", other.voteId))).toEqual([Code.PermissionDenied, "permission_denied", "coordinator_or_starter"]);
  });

  it("deadline passed: the host closes and counts each vote (quorum reached or not), and takes no ballot after it", async () => {
    const soon = new Date(Date.now() + 1200);
    const started = await chair.startVote("council", { voteId: "soon-1", question: "soon?", options: ["yes", "no"], rule: ConsensusRule.MAJORITY, quorum: 1, deadline: soon });
    await chair.startVote("council", { voteId: "soon-2", question: "soon?", options: ["yes", "no"], rule: ConsensusRule.MAJORITY, deadline: soon });
    await a.client.cast("council", "soon-1", { choice: "no" });
    await a.client.cast("council", "soon-2", { choice: "no" });
    const tallies = new Map<string, unknown>();
    for await (const item of chair.watch("council", { fromSequence: Number(started.group!.lastSequence) + 1 })) {
      if (item.kind === "event" && item.event.payload.kind === GroupEventKind.VOTE_TALLIED) tallies.set(item.event.payload.subjectId, item.event.payload.tally);
      if (tallies.size === 2) break;
    }
    expect(tallies.get("soon-1")).toMatchObject({ closedReason: VoteCloseReason.DEADLINE, outcome: VoteOutcome.DECIDED, winner: "no" });
    expect(tallies.get("soon-2")).toMatchObject({ closedReason: VoteCloseReason.DEADLINE, outcome: VoteOutcome.NO_QUORUM, ballots: 1, quorum: 3 });
    expect((await chair.getVote("council", "soon-1")).state).toBe(VoteState.CLOSED);
    expect(await refusal(b.client.cast("council", "soon-1", { choice: "yes" }))).toEqual([Code.FailedPrecondition, "illegal_transition", "vote_closed"]);
  });
});

describe("ballots", () => {
  it("one per voter: a second is refused, the same envelope again is answered as before", async () => {
    const { voteId } = await runVote(ConsensusRule.MAJORITY, [[a.client, { choice: "yes" }]]);
    expect(await refusal(a.client.cast("council", voteId, { choice: "no" }))).toEqual([Code.FailedPrecondition, "illegal_transition", "one_ballot"]);
    const envelope = b.client.envelope(MessageType.A2N_VOTE_CAST, create(VoteCastPayloadSchema, { groupId: "council", voteId, choice: "no" }));
    const first = await b.client.send(envelope, "council");
    const again = await b.client.send(envelope, "council");
    expect(again.reply.sequence).toBe(first.reply.sequence);
    expect((await chair.getVote("council", voteId)).ballots).toHaveLength(2);
  });

  it("refuses forged ballots, ballots from outside the group and from voters not eligible", async () => {
    const { voteId } = await runVote(ConsensusRule.MAJORITY, [], { voters: ids(chair, a.client, b.client) });
    const raw = createClient(GroupService, createConnectTransport({ baseUrl: host.url, httpVersion: "1.1" }));
    // A's ballot with its choice changed after signing.
    const signed = a.client.envelope(MessageType.A2N_VOTE_CAST, create(VoteCastPayloadSchema, { groupId: "council", voteId, choice: "yes" }));
    const tampered = create(EnvelopeSchema, { ...signed, payload: toBinary(VoteCastPayloadSchema, create(VoteCastPayloadSchema, { groupId: "council", voteId, choice: "no" })) });
    expect(await refusal(raw.send({ envelope: tampered }))).toEqual([Code.Unauthenticated, "signature_invalid", undefined]);
    // A ballot in B's name signed with the chair's key.
    const impostor = seal(
      { messageType: MessageType.A2N_VOTE_CAST, payload: create(VoteCastPayloadSchema, { groupId: "council", voteId, choice: "no" }), sender: { agentId: b.ref.agentId }, receiver: chair.host },
      chair.identity.key,
    ).envelope;
    expect((await refusal(raw.send({ envelope: impostor })))[0]).toBe(Code.Unauthenticated);
    // A properly signed ballot from an agent outside the group: to it the group does not exist.
    const outsider = await userClient(host.url);
    expect(await refusal(outsider.cast("council", voteId, { choice: "yes" }))).toEqual([Code.NotFound, "invalid_params", "not_found"]);
    // A member who is not among this vote's voters.
    expect(await refusal(c.client.cast("council", voteId, { choice: "yes" }))).toEqual([Code.PermissionDenied, "permission_denied", "not_eligible"]);
    // Ballots that do not fit the vote.
    expect(await refusal(a.client.cast("council", voteId, { choice: "perhaps" }))).toEqual([Code.InvalidArgument, "invalid_params", undefined]);
    expect(await refusal(a.client.cast("council", voteId, { ranking: ["yes"] }))).toEqual([Code.InvalidArgument, "invalid_params", undefined]);
    expect((await chair.getVote("council", voteId)).ballots).toHaveLength(0);
  });
});

// ── an independent recount ─────────────────────────────────────────────────

it("a member recomputes the count from the signed ballots alone", async () => {
  const [w, x, y, z] = everyone();
  const { voteId } = await runVote(ConsensusRule.WEIGHTED, [[w!, { choice: "no" }], [x!, { choice: "maybe" }], [y!, { choice: "no" }], [z!, { abstain: true }]]);
  const published = await b.client.tally("council", voteId);
  // The terms, signed by a coordinator of the group.
  const start = published.start!.envelope!;
  const startHeader = fromBinary(HeaderSchema, start.header);
  expect(verifies(start, start.signature!.publicKey)).toBe(true);
  const terms = fromBinary(VoteStartPayloadSchema, start.payload);
  expect(startHeader.sender?.agentId).toBe(chair.agentId);
  // Each ballot: signed by the key of an eligible voter, whose self-certifying id it bears; one per voter.
  const weights = new Map(published.eligible.map((voter) => [voter.agentId, { weight: voter.weight, key: voter.publicKey }]));
  const counted = new Map<string, number>();
  const seen = new Set<string>();
  let abstentions = 0;
  for (const ballot of published.ballots) {
    const envelope = ballot.envelope!;
    const header = fromBinary(HeaderSchema, envelope.header);
    const voter = weights.get(header.sender!.agentId)!;
    expect(voter, "only eligible voters' ballots are published").toBeDefined();
    expect(Buffer.from(envelope.signature!.publicKey).equals(Buffer.from(voter.key))).toBe(true);
    expect(derivedId(voter.key)).toBe(header.sender!.agentId);
    expect(verifies(envelope, voter.key)).toBe(true);
    expect(seen.has(header.sender!.agentId)).toBe(false);
    seen.add(header.sender!.agentId);
    const cast = fromBinary(VoteCastPayloadSchema, envelope.payload);
    expect([cast.groupId, cast.voteId]).toEqual(["council", voteId]);
    if (cast.abstain) abstentions++;
    else counted.set(cast.choice, (counted.get(cast.choice) ?? 0) + voter.weight);
  }
  const total = [...counted.values()].reduce((sum, n) => sum + n, 0);
  const quorum = terms.quorum || Math.floor(published.eligible.length / 2) + 1;
  const winner = [...counted.entries()].find(([, weight]) => weight * 2 > total)?.[0];
  expect(terms.rule).toBe(ConsensusRule.WEIGHTED);
  expect(published.ballots.length >= quorum).toBe(true);
  // Weights: chair 1 (no), a 4 (maybe), b 1 (no), c abstains: maybe 4 of 6.
  expect({ winner, total, abstentions }).toEqual({ winner: "maybe", total: 6, abstentions: 1 });
  expect(published.tally).toMatchObject({ outcome: VoteOutcome.DECIDED, winner, counted: BigInt(total), abstentions, quorum, final: true });
  expect(published.tally?.counts.map((entry) => [entry.option, Number(entry.votes)])).toEqual(terms.options.map((option) => [option, counted.get(option) ?? 0]));
  expect(published.tally?.ballotMessageIds).toEqual(published.ballots.map((ballot) => fromBinary(HeaderSchema, ballot.envelope!.header).messageId));
  // The same count is in the group's log, signed by the host.
  const event = (await (async () => {
    for await (const item of b.client.watch("council", { fromSequence: 1 })) {
      if (item.kind === "event" && item.event.payload.kind === GroupEventKind.VOTE_TALLIED && item.event.payload.subjectId === voteId) return item.event;
    }
  })())!;
  expect(event.payload.tally?.winner).toBe(winner);
  expect(event.header.sender?.agentId).toBe(host.ref.agentId);
});

it("an observer is not a voter, and the default voters are the coordinators and members when the vote starts", async () => {
  const watcher = await userClient(host.url);
  const invitation = (await chair.invite("council", { agentId: watcher.agentId, keyId: watcher.identity.key.keyId }, { role: GroupRole.OBSERVER })).reply.header.replyTo;
  await watcher.join("council", { invitationId: invitation });
  const voteId = `vote-${++voteNumber}`;
  const started = await chair.startVote("council", { voteId, question: "?", options: ["yes", "no"], rule: ConsensusRule.MAJORITY, deadline: later() });
  expect(started.vote?.eligible.map((voter) => voter.agentId).sort()).toEqual(ids(...everyone()).sort());
  expect(await refusal(watcher.cast("council", voteId, { choice: "yes" }))).toEqual([Code.PermissionDenied, "permission_denied", "not_eligible"]);
  // Terms that cannot be counted are refused before anything starts.
  const bad = { voteId: "bad", question: "?", rule: ConsensusRule.SUPERMAJORITY, deadline: later() };
  expect(await refusal(chair.startVote("council", { ...bad, options: ["only"] }))).toEqual([Code.InvalidArgument, "invalid_params", undefined]);
  expect(await refusal(chair.startVote("council", { ...bad, options: ["a", "b"], threshold: { numerator: 1, denominator: 2 } }))).toEqual([Code.InvalidArgument, "invalid_params", undefined]);
  expect(await refusal(chair.startVote("council", { ...bad, options: ["a", "b"], deadline: new Date(Date.now() - 1000) }))).toEqual([Code.InvalidArgument, "invalid_params", undefined]);
});
