// The consensus rules as pure functions: every rule's decision, ties,
// quorum, abstentions and the instant-runoff rounds with their tie-breaks,
// against expectations written out by hand.
import { describe, expect, it } from "vitest";
import { ConsensusRule, VoteCloseReason, VoteOutcome } from "../gen/synapse/v1/a2n_pb.js";
import { countVote, effectiveQuorum, type TallyBallot } from "../src/group/tally.js";

const voters = (n: number, weights: number[] = []) => Array.from({ length: n }, (_, i) => ({ agentId: `v${i}`, weight: weights[i] ?? 1 }));
let id = 0;
const choice = (agent: number, option: string): TallyBallot => ({ agentId: `v${agent}`, messageId: `m${++id}`, choice: option, ranking: [], abstain: false });
const abstain = (agent: number): TallyBallot => ({ agentId: `v${agent}`, messageId: `m${++id}`, choice: "", ranking: [], abstain: true });
const ranked = (agent: number, ...ranking: string[]): TallyBallot => ({ agentId: `v${agent}`, messageId: `m${++id}`, choice: "", ranking, abstain: false });

function count(rule: ConsensusRule, eligible: number, ballots: TallyBallot[], extra: { quorum?: number; weights?: number[]; threshold?: { numerator: number; denominator: number }; options?: string[] } = {}) {
  return countVote({
    voteId: "v",
    options: extra.options ?? ["yes", "no", "maybe"],
    rule,
    threshold: extra.threshold,
    quorum: effectiveQuorum(extra.quorum ?? 0, eligible),
    eligible: voters(eligible, extra.weights),
    ballots,
    final: true,
    closedReason: VoteCloseReason.CLOSED,
  });
}

describe("majority", () => {
  it("decides with more than half of the non-abstaining ballots; abstentions count for the quorum only", () => {
    const tally = count(ConsensusRule.MAJORITY, 5, [choice(0, "yes"), choice(1, "yes"), choice(2, "no"), abstain(3)]);
    expect(tally).toMatchObject({ outcome: VoteOutcome.DECIDED, winner: "yes", ballots: 4, abstentions: 1, quorum: 3, counted: 3n });
    expect(tally.counts.map((c) => [c.option, c.votes])).toEqual([["yes", 2n], ["no", 1n], ["maybe", 0n]]);
  });
  it("is a tie when the leaders share the most votes, no majority when one leads without half", () => {
    expect(count(ConsensusRule.MAJORITY, 4, [choice(0, "yes"), choice(1, "yes"), choice(2, "no"), choice(3, "no")])).toMatchObject({ outcome: VoteOutcome.TIE, tied: ["yes", "no"], winner: "" });
    expect(count(ConsensusRule.MAJORITY, 4, [choice(0, "yes"), choice(1, "yes"), choice(2, "no"), choice(3, "maybe")])).toMatchObject({ outcome: VoteOutcome.NO_MAJORITY });
  });
  it("decides nothing below the quorum, however clear", () => {
    expect(count(ConsensusRule.MAJORITY, 5, [choice(0, "yes"), choice(1, "yes")])).toMatchObject({ outcome: VoteOutcome.NO_QUORUM, quorum: 3 });
    expect(count(ConsensusRule.MAJORITY, 5, [choice(0, "yes")], { quorum: 1 })).toMatchObject({ outcome: VoteOutcome.DECIDED, winner: "yes" });
    expect(count(ConsensusRule.MAJORITY, 3, [abstain(0), abstain(1)])).toMatchObject({ outcome: VoteOutcome.NO_MAJORITY, ballots: 2 });
  });
});

describe("supermajority", () => {
  it("needs at least 2/3 by default, exactly 2/3 included", () => {
    expect(count(ConsensusRule.SUPERMAJORITY, 3, [choice(0, "yes"), choice(1, "yes"), choice(2, "no")])).toMatchObject({ outcome: VoteOutcome.DECIDED, winner: "yes" });
    expect(count(ConsensusRule.SUPERMAJORITY, 5, [choice(0, "yes"), choice(1, "yes"), choice(2, "yes"), choice(3, "no"), choice(4, "no")])).toMatchObject({ outcome: VoteOutcome.NO_MAJORITY });
  });
  it("takes a configured threshold", () => {
    const four = [choice(0, "yes"), choice(1, "yes"), choice(2, "yes"), choice(3, "no")];
    expect(count(ConsensusRule.SUPERMAJORITY, 4, four, { threshold: { numerator: 3, denominator: 4 } })).toMatchObject({ outcome: VoteOutcome.DECIDED, winner: "yes" });
    expect(count(ConsensusRule.SUPERMAJORITY, 4, four, { threshold: { numerator: 4, denominator: 5 } })).toMatchObject({ outcome: VoteOutcome.NO_MAJORITY });
  });
});

describe("unanimous", () => {
  it("decides when every eligible voter voted and all non-abstaining ballots agree", () => {
    expect(count(ConsensusRule.UNANIMOUS, 3, [choice(0, "yes"), choice(1, "yes"), abstain(2)])).toMatchObject({ outcome: VoteOutcome.DECIDED, winner: "yes" });
  });
  it("does not when one dissents or one did not vote", () => {
    expect(count(ConsensusRule.UNANIMOUS, 3, [choice(0, "yes"), choice(1, "yes"), choice(2, "no")])).toMatchObject({ outcome: VoteOutcome.NO_MAJORITY });
    expect(count(ConsensusRule.UNANIMOUS, 3, [choice(0, "yes"), choice(1, "yes")])).toMatchObject({ outcome: VoteOutcome.NO_MAJORITY });
  });
});

describe("weighted", () => {
  it("counts each ballot with its voter's weight", () => {
    const ballots = [choice(0, "yes"), choice(1, "no"), choice(2, "no")];
    expect(count(ConsensusRule.WEIGHTED, 3, ballots, { weights: [5, 1, 1] })).toMatchObject({ outcome: VoteOutcome.DECIDED, winner: "yes", counted: 7n });
    expect(count(ConsensusRule.MAJORITY, 3, ballots, { weights: [5, 1, 1] })).toMatchObject({ outcome: VoteOutcome.DECIDED, winner: "no" });
    expect(count(ConsensusRule.WEIGHTED, 3, ballots, { weights: [2, 1, 1] })).toMatchObject({ outcome: VoteOutcome.TIE, tied: ["yes", "no"] });
  });
});

describe("ranked (instant runoff)", () => {
  it("eliminates the fewest, transfers to the next preference, and decides by a majority of live ballots", () => {
    const tally = count(ConsensusRule.RANKED, 5, [ranked(0, "yes"), ranked(1, "yes"), ranked(2, "no"), ranked(3, "no"), ranked(4, "maybe", "no")]);
    expect(tally).toMatchObject({ outcome: VoteOutcome.DECIDED, winner: "no" });
    expect(tally.rounds.map((r) => [r.counts.map((c) => Number(c.votes)), r.eliminated])).toEqual([
      [[2, 2, 1], "maybe"],
      [[2, 3], ""],
    ]);
  });
  it("breaks a tie for fewest by earlier rounds, then eliminates the option listed last", () => {
    // Round 1: a 3, b 2, c 2, d 1 -> d out (to c). Round 2: a 3, b 2, c 3 -> b out.
    const options = ["a", "b", "c", "d"];
    const ballots = [ranked(0, "a"), ranked(1, "a"), ranked(2, "a"), ranked(3, "b", "c"), ranked(4, "b", "c"), ranked(5, "c"), ranked(6, "c"), ranked(7, "d", "c")];
    const tally = count(ConsensusRule.RANKED, 8, ballots, { options });
    expect(tally.rounds.map((r) => r.eliminated)).toEqual(["d", "b", ""]);
    expect(tally).toMatchObject({ outcome: VoteOutcome.DECIDED, winner: "c" });
    // Round 2 has a tie for fewest (b 4, c 4); b had fewer in round 1 (3 against 4), so b goes, not c (listed last).
    const earlier = [
      ...[0, 1, 2, 3, 4].map((i) => ranked(i, "a")),
      ...[5, 6, 7].map((i) => ranked(i, "b", "c")),
      ...[8, 9, 10, 11].map((i) => ranked(i, "c")),
      ranked(12, "d", "b", "c"),
    ];
    const backwards = count(ConsensusRule.RANKED, 13, earlier, { options });
    expect(backwards.rounds.map((r) => [r.counts.map((c) => Number(c.votes)), r.eliminated])).toEqual([
      [[5, 3, 4, 1], "d"],
      [[5, 4, 4], "b"],
      [[5, 8], ""],
    ]);
    expect(backwards).toMatchObject({ outcome: VoteOutcome.DECIDED, winner: "c" });
    const backward = [ranked(0, "a"), ranked(1, "a"), ranked(2, "a"), ranked(3, "b"), ranked(4, "c"), ranked(5, "c"), ranked(6, "d", "b"), ranked(7, "d", "b"), ranked(8, "d", "b")];
    // Round 1: a 3, b 1, c 2, d 3 -> b out (exhausted). Round 2: a 3, c 2, d 3 -> c out. Round 3: a 3, d 3: tie.
    const tied = count(ConsensusRule.RANKED, 9, backward, { options });
    expect(tied.rounds.map((r) => r.eliminated)).toEqual(["b", "c", ""]);
    expect(tied).toMatchObject({ outcome: VoteOutcome.TIE, tied: ["a", "d"] });
    // All tied in round 1 with no earlier round: the option listed last goes first.
    const listed = count(ConsensusRule.RANKED, 3, [ranked(0, "yes", "no"), ranked(1, "maybe", "no"), ranked(2, "no")]);
    expect(listed.rounds.map((r) => r.eliminated)).toEqual(["maybe", ""]);
    expect(listed).toMatchObject({ outcome: VoteOutcome.DECIDED, winner: "no" });
  });
  it("without an earlier round, eliminates the tied option listed last", () => {
    // Round 1: a 4, b 3, c 2, d 2 -> tie d/c for fewest, no earlier round: d (listed last) out, to b.
    // Round 2: a 4, b 5, c 2 -> c out, to a. Round 3: a 6, b 5 -> a wins.
    const ballots = [
      ...[0, 1, 2, 3].map((i) => ranked(i, "a")),
      ...[4, 5, 6].map((i) => ranked(i, "b")),
      ranked(7, "c", "a"),
      ranked(8, "c", "a"),
      ranked(9, "d", "b"),
      ranked(10, "d", "b"),
    ];
    const tally = count(ConsensusRule.RANKED, 11, ballots, { options: ["a", "b", "c", "d"] });
    expect(tally.rounds.map((r) => r.eliminated)).toEqual(["d", "c", ""]);
    expect(tally).toMatchObject({ outcome: VoteOutcome.DECIDED, winner: "a" });
  });
  it("is a tie when two options remain level, and decides nothing when every ballot is exhausted", () => {
    expect(count(ConsensusRule.RANKED, 2, [ranked(0, "yes"), ranked(1, "no")])).toMatchObject({ outcome: VoteOutcome.TIE, tied: ["yes", "no"] });
    expect(count(ConsensusRule.RANKED, 2, [abstain(0), abstain(1)])).toMatchObject({ outcome: VoteOutcome.NO_MAJORITY });
  });
});

it("an interim count is not final and a dissolved vote is cancelled", () => {
  const interim = countVote({ voteId: "v", options: ["a", "b"], rule: ConsensusRule.MAJORITY, quorum: 1, eligible: voters(2), ballots: [choice(0, "a")], final: false, closedReason: VoteCloseReason.UNSPECIFIED });
  expect(interim).toMatchObject({ final: false, outcome: VoteOutcome.DECIDED, closedReason: VoteCloseReason.UNSPECIFIED });
  const cancelled = countVote({ voteId: "v", options: ["a", "b"], rule: ConsensusRule.MAJORITY, quorum: 1, eligible: voters(2), ballots: [choice(0, "a")], final: true, closedReason: VoteCloseReason.DISSOLVED });
  expect(cancelled.outcome).toBe(VoteOutcome.CANCELLED);
  // A ballot from someone not eligible is not counted.
  const stranger = countVote({ voteId: "v", options: ["a", "b"], rule: ConsensusRule.MAJORITY, quorum: 1, eligible: voters(1), ballots: [choice(0, "a"), choice(5, "b")], final: true, closedReason: VoteCloseReason.CLOSED });
  expect(stranger).toMatchObject({ ballots: 1, winner: "a" });
});
