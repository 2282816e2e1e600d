// `synapse vote start|cast|tally|close`: votes in a group (A2N), each ballot
// signed by its voter (--home: the voter's identity, an agent's data dir).
import { toJson } from "@bufbuild/protobuf";
import { ConsensusRule, VoteTallySchema } from "../../../gen/synapse/v1/a2n_pb.js";
import { VoteSchema } from "../../../gen/synapse/v1/group_pb.js";
import { durationOption, integerOption, parse, requirePositional, UsageError } from "../args.js";
import { clientOptions, openGroupClient } from "../client.js";
import { describeGroupEvent, describeVote, sendJson, tallyExit } from "../group-output.js";
import { printJson, printLine } from "../output.js";

export const voteUsage = `usage: synapse vote start URL GROUP_ID --question Q --option A --option B [--option ...]
                       [--rule majority|supermajority|unanimous|weighted|ranked] [--threshold N/D]
                       [--quorum N] [--voter AGENT_ID]... [--deadline DURATION] [--vote-id ID]
       synapse vote cast  URL GROUP_ID VOTE_ID (--choice OPTION | --rank A,B,C | --abstain)
       synapse vote tally URL GROUP_ID VOTE_ID
       synapse vote close URL GROUP_ID VOTE_ID [--reason TEXT]
Every form takes --home DIR, --protocol P and --json.

A vote is decided by its rule: majority (more than half of the non-abstaining
ballots), supermajority (at least --threshold of them, default 2/3), unanimous
(every eligible voter voted, all for one option), weighted (majority of the
voters' weights) or ranked (instant runoff over --rank ballots). Fewer ballots
than --quorum (default a majority of the voters) decide nothing. It closes at
--deadline (default 10m), when every voter has voted, or with \`close\`. One
ballot per voter; \`tally\` shows the count with the signed ballots it is made of.
Exit status: 0 decided, 1 closed without a decision (or refused), 2 usage
error, 3 still open.`;

const rules: Record<string, ConsensusRule> = {
  majority: ConsensusRule.MAJORITY,
  supermajority: ConsensusRule.SUPERMAJORITY,
  unanimous: ConsensusRule.UNANIMOUS,
  weighted: ConsensusRule.WEIGHTED,
  ranked: ConsensusRule.RANKED,
};

function threshold(value: string | undefined): { numerator: number; denominator: number } | undefined {
  if (value === undefined) return undefined;
  const match = /^(\d+)\/(\d+)$/.exec(value.trim());
  if (match === null) throw new UsageError(`--threshold takes N/D, for example 3/4, got ${JSON.stringify(value)}`);
  return { numerator: Number(match[1]), denominator: Number(match[2]) };
}

export async function vote(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === undefined || sub === "--help" || sub === "-h") {
    printLine(voteUsage);
    return sub === undefined ? 2 : 0;
  }
  const { values, positionals } = parse(
    rest,
    {
      ...clientOptions,
      question: { type: "string" },
      option: { type: "string", multiple: true },
      rule: { type: "string" },
      threshold: { type: "string" },
      quorum: { type: "string" },
      voter: { type: "string", multiple: true },
      deadline: { type: "string" },
      "vote-id": { type: "string" },
      choice: { type: "string" },
      rank: { type: "string" },
      abstain: { type: "boolean" },
      reason: { type: "string" },
    },
    voteUsage,
  );
  if (values.help) {
    printLine(voteUsage);
    return 0;
  }
  const url = requirePositional(positionals, 0, "URL", voteUsage);
  const groupId = requirePositional(positionals, 1, "GROUP_ID", voteUsage);
  if (sub === "start") {
    if (values.question === undefined) throw new UsageError(`--question is required\n\n${voteUsage}`);
    const rule = rules[(values.rule ?? "majority").toLowerCase()];
    if (rule === undefined) throw new UsageError(`--rule must be one of ${Object.keys(rules).join(", ")}\n\n${voteUsage}`);
    const client = await openGroupClient(url, values);
    const result = await client.startVote(groupId, {
      voteId: values["vote-id"],
      question: values.question,
      options: values.option ?? [],
      rule,
      threshold: threshold(values.threshold),
      quorum: integerOption(values.quorum, "--quorum"),
      eligibleVoters: values.voter,
      deadline: new Date(Date.now() + (durationOption(values.deadline, "--deadline") ?? 600_000)),
    });
    if (values.json) printJson(sendJson(result));
    else {
      printLine(describeGroupEvent(result.reply));
      printLine(`vote ${result.vote?.voteId} is open until ${result.vote?.deadline ? new Date(Number(result.vote.deadline.seconds) * 1000).toISOString() : "?"}`);
    }
    return tallyExit(result.vote?.tally);
  }
  const voteId = requirePositional(positionals, 2, "VOTE_ID", voteUsage);
  const client = await openGroupClient(url, values);
  switch (sub) {
    case "cast": {
      const given = [values.choice !== undefined, values.rank !== undefined, values.abstain === true].filter(Boolean).length;
      if (given !== 1) throw new UsageError(`give exactly one of --choice, --rank, --abstain\n\n${voteUsage}`);
      const ballot = values.choice !== undefined ? { choice: values.choice } : values.rank !== undefined ? { ranking: values.rank.split(",").map((o) => o.trim()) } : { abstain: true as const };
      const result = await client.cast(groupId, voteId, ballot);
      if (values.json) printJson(sendJson(result));
      else for (const line of [describeGroupEvent(result.reply), ...describeVote(result.vote!, result.vote?.tally)]) printLine(line);
      return tallyExit(result.vote?.tally);
    }
    case "close": {
      const result = await client.closeVote(groupId, voteId, values.reason);
      if (values.json) printJson(sendJson(result));
      else for (const line of describeVote(result.vote!, result.vote?.tally)) printLine(line);
      return tallyExit(result.vote?.tally);
    }
    case "tally": {
      const [shown, counted] = await Promise.all([client.getVote(groupId, voteId), client.tally(groupId, voteId)]);
      if (values.json) {
        printJson({ tally: toJson(VoteTallySchema, counted.tally!), summary: counted.summary, vote: toJson(VoteSchema, shown) });
      } else {
        for (const line of describeVote(shown, counted.tally)) printLine(line);
        for (const ballot of counted.ballots) {
          const cast = ballot.view?.payload?.body.case === "a2nVoteCast" ? ballot.view.payload.body.value : undefined;
          const what = cast === undefined ? "?" : cast.abstain ? "abstains" : cast.ranking.length > 0 ? cast.ranking.join(" > ") : cast.choice;
          printLine(`  ballot ${ballot.view?.header?.messageId} from ${ballot.view?.header?.sender?.agentId}: ${what}`);
        }
      }
      return tallyExit(counted.tally);
    }
    default:
      throw new UsageError(`unknown vote command ${JSON.stringify(sub)}\n\n${voteUsage}`);
  }
}
