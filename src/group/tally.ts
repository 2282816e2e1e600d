// Counting a vote (VotingHandler): the five consensus rules of seed 000
// §4.2 as pure functions of the vote's terms and its ballots, so that the
// host's count and any member's recount are the same computation
// (docs/PROTOCOL.md §7.6 states the rules in words).
import { create } from "@bufbuild/protobuf";
import {
  ConsensusRule,
  OptionCountSchema,
  RankedRoundSchema,
  VoteCloseReason,
  VoteOutcome,
  VoteTallySchema,
  type OptionCount,
  type RankedRound,
  type VoteTally,
} from "../../gen/synapse/v1/a2n_pb.js";
import { counted } from "../text/plural.js";

export interface TallyBallot {
  readonly agentId: string;
  readonly messageId: string;
  readonly choice: string;
  readonly ranking: readonly string[];
  readonly abstain: boolean;
}

export interface TallyInput {
  readonly voteId: string;
  readonly options: readonly string[];
  readonly rule: ConsensusRule;
  /** Supermajority share; default 2/3. */
  readonly threshold?: { readonly numerator: number; readonly denominator: number };
  /** The ballots required (already defaulted: floor(n/2) + 1). */
  readonly quorum: number;
  readonly eligible: readonly { readonly agentId: string; readonly weight: number }[];
  /** Accepted ballots, in the order accepted; at most one per eligible voter. */
  readonly ballots: readonly TallyBallot[];
  readonly final: boolean;
  readonly closedReason: VoteCloseReason;
}

export const DEFAULT_THRESHOLD = { numerator: 2, denominator: 3 } as const;

/** The quorum a vote asks for: given, or a majority of the eligible voters. */
export function effectiveQuorum(quorum: number, eligible: number): number {
  return quorum === 0 ? Math.floor(eligible / 2) + 1 : quorum;
}

const counts = (options: readonly string[], tallies: Map<string, number>): OptionCount[] =>
  options.map((option) => create(OptionCountSchema, { option, votes: BigInt(tallies.get(option) ?? 0) }));

/** Options holding the highest count (all of them when it is shared). */
function leaders(options: readonly string[], tallies: Map<string, number>): string[] {
  const top = Math.max(0, ...options.map((option) => tallies.get(option) ?? 0));
  return top === 0 ? [] : options.filter((option) => (tallies.get(option) ?? 0) === top);
}

interface Decision {
  outcome: VoteOutcome;
  winner?: string;
  tied?: string[];
}

/** Majority, supermajority and weighted: one option must reach `reaches(count, total)`. */
function plurality(options: readonly string[], tallies: Map<string, number>, total: number, reaches: (count: number) => boolean): Decision {
  const winner = options.find((option) => total > 0 && reaches(tallies.get(option) ?? 0));
  if (winner !== undefined) return { outcome: VoteOutcome.DECIDED, winner };
  const top = leaders(options, tallies);
  return top.length > 1 ? { outcome: VoteOutcome.TIE, tied: top } : { outcome: VoteOutcome.NO_MAJORITY };
}

/**
 * Instant runoff: each round every ballot counts for its most preferred
 * option still in the count; an option with more than half of the ballots
 * not yet exhausted wins; two options left with equal counts are a tie;
 * otherwise one option with the fewest votes is eliminated, a tie for
 * fewest broken by the fewest votes in the latest earlier round where they
 * differ, and then by eliminating the one listed last in the options.
 */
function instantRunoff(options: readonly string[], rankings: readonly (readonly string[])[]): Decision & { rounds: RankedRound[] } {
  const continuing = [...options];
  const history: Array<Map<string, number>> = [];
  const rounds: RankedRound[] = [];
  for (let round = 1; ; round++) {
    const tallies = new Map<string, number>(continuing.map((option) => [option, 0]));
    let exhausted = 0;
    for (const ranking of rankings) {
      const first = ranking.find((option) => tallies.has(option));
      if (first === undefined) exhausted++;
      else tallies.set(first, tallies.get(first)! + 1);
    }
    history.push(tallies);
    const entry = create(RankedRoundSchema, { round, counts: counts(continuing, tallies), exhausted: BigInt(exhausted) });
    rounds.push(entry);
    const active = rankings.length - exhausted;
    if (active === 0) return { outcome: VoteOutcome.NO_MAJORITY, rounds };
    const winner = continuing.find((option) => tallies.get(option)! * 2 > active);
    if (winner !== undefined) return { outcome: VoteOutcome.DECIDED, winner, rounds };
    const fewest = Math.min(...continuing.map((option) => tallies.get(option)!));
    let lowest = continuing.filter((option) => tallies.get(option) === fewest);
    if (continuing.length === 2 && lowest.length === 2) return { outcome: VoteOutcome.TIE, tied: [...continuing], rounds };
    for (let earlier = history.length - 2; earlier >= 0 && lowest.length > 1; earlier--) {
      const before = history[earlier]!;
      const least = Math.min(...lowest.map((option) => before.get(option) ?? 0));
      lowest = lowest.filter((option) => (before.get(option) ?? 0) === least);
    }
    const eliminated = lowest[lowest.length - 1]!; // still tied: the one listed last goes
    entry.eliminated = eliminated;
    continuing.splice(continuing.indexOf(eliminated), 1);
  }
}

export function countVote(input: TallyInput): VoteTally {
  const weightOf = new Map(input.eligible.map((voter) => [voter.agentId, voter.weight]));
  const ballots = input.ballots.filter((ballot) => weightOf.has(ballot.agentId));
  const abstentions = ballots.filter((ballot) => ballot.abstain).length;
  const cast = ballots.filter((ballot) => !ballot.abstain);
  const weighted = input.rule === ConsensusRule.WEIGHTED;
  const tallies = new Map<string, number>();
  let counted = 0;
  for (const ballot of cast) {
    const option = input.rule === ConsensusRule.RANKED ? ballot.ranking[0] : ballot.choice;
    if (option === undefined) continue;
    const amount = weighted ? weightOf.get(ballot.agentId)! : 1;
    tallies.set(option, (tallies.get(option) ?? 0) + amount);
    counted += amount;
  }
  const tally = create(VoteTallySchema, {
    voteId: input.voteId,
    counts: counts(input.options, tallies),
    eligible: input.eligible.length,
    ballots: ballots.length,
    abstentions,
    quorum: input.quorum,
    final: input.final,
    closedReason: input.final ? input.closedReason : VoteCloseReason.UNSPECIFIED,
    ballotMessageIds: ballots.map((ballot) => ballot.messageId),
    counted: BigInt(counted),
  });
  let decision: Decision;
  if (input.final && input.closedReason === VoteCloseReason.DISSOLVED) {
    decision = { outcome: VoteOutcome.CANCELLED };
  } else if (input.rule === ConsensusRule.RANKED) {
    const runoff = instantRunoff(input.options, cast.map((ballot) => ballot.ranking));
    tally.rounds = runoff.rounds;
    decision = runoff;
  } else if (input.rule === ConsensusRule.SUPERMAJORITY) {
    const { numerator, denominator } = input.threshold ?? DEFAULT_THRESHOLD;
    decision = plurality(input.options, tallies, counted, (count) => count * denominator >= numerator * counted);
  } else if (input.rule === ConsensusRule.UNANIMOUS) {
    const everyone = ballots.length === input.eligible.length;
    const only = leaders(input.options, tallies);
    decision = everyone && only.length === 1 && tallies.get(only[0]!) === counted ? { outcome: VoteOutcome.DECIDED, winner: only[0]! } : { outcome: VoteOutcome.NO_MAJORITY };
  } else {
    decision = plurality(input.options, tallies, counted, (count) => count * 2 > counted);
  }
  // Quorum overrides any decision; a cancelled vote stays cancelled.
  if (ballots.length < input.quorum && decision.outcome !== VoteOutcome.CANCELLED) decision = { outcome: VoteOutcome.NO_QUORUM };
  tally.outcome = decision.outcome;
  tally.winner = decision.outcome === VoteOutcome.DECIDED ? (decision.winner ?? "") : "";
  tally.tied = decision.outcome === VoteOutcome.TIE ? (decision.tied ?? []) : [];
  return tally;
}

/** One line for people: "decided: yes (3 of 4 ballots)". */
export function describeTally(tally: VoteTally): string {
  const base = `${tally.ballots} of ${counted(tally.eligible, "ballot")}, ${tally.abstentions} abstaining, quorum ${tally.quorum}`;
  const stage = tally.final ? "" : " (interim)";
  switch (tally.outcome) {
    case VoteOutcome.DECIDED:
      return `decided: ${tally.winner}${stage} (${base})`;
    case VoteOutcome.TIE:
      return `tie: ${tally.tied.join(", ")}${stage} (${base})`;
    case VoteOutcome.NO_QUORUM:
      return `no quorum${stage} (${base})`;
    case VoteOutcome.CANCELLED:
      return `cancelled (${base})`;
    default:
      return `no decision${stage} (${base})`;
  }
}
