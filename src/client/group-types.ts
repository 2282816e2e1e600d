// What GroupClient takes and returns: its options, the inputs of group
// tasks, votes, answers and ballots, and the verified events of a group's log.
import type { JsonObject } from "@bufbuild/protobuf";
import type { ConnectError, Transport } from "@connectrpc/connect";
import type { ConsensusRule, GroupDecisionAction, GroupEventPayload, GroupTaskStrategy } from "../../gen/synapse/v1/a2n_pb.js";
import type { Envelope, Header } from "../../gen/synapse/v1/envelope_pb.js";
import type { Group, GroupTask, Vote } from "../../gen/synapse/v1/group_pb.js";
import type { AgentIdentity } from "../agent/identity.js";
import type { TrustPolicy } from "../envelope/trust.js";
import type { TransportOptions } from "./transport.js";

/** Options of {@link GroupClient.connect}. */
export interface GroupClientOptions {
  /** The host's base URL. */
  baseUrl: string;
  /** This agent's identity: its key signs every message (and is its consent). */
  identity: AgentIdentity;
  /** The protocol and HTTP version to call with; default Connect (JSON) over HTTP/1.1, HTTP/2 for https. */
  transport?: TransportOptions;
  /** A transport to use instead of one built from baseUrl and `transport`. */
  rpcTransport?: Transport;
  /** How the host's key is trusted; default pinned on first use in memory. */
  trust?: TrustPolicy;
  /** Retries for a watch after a dropped connection; default 5. */
  maxRetries?: number;
  /** The first retry waits this long, each next one twice as long; default 500 ms. */
  retryBaseDelayMs?: number;
}

/** A group event the host signed (`a2n:group_event`), verified. */
export interface VerifiedGroupEvent {
  /** The envelope as it arrived. */
  envelope: Envelope;
  /** Its signed header. */
  header: Header;
  /** Its place in the group's log, from 1, without gaps. */
  sequence: number;
  /** What happened: the member's or coordinator's signed message it records, a sub-task's event, a vote's result. */
  payload: GroupEventPayload;
}

/** What a message to the host returned. */
export interface GroupSendResult {
  /** The log event the host recorded for the message, verified. */
  reply: VerifiedGroupEvent;
  /** The group as it stands after the message. */
  group?: Group;
  /** The group task the message was about, after it (and after waiting, when asked to wait). */
  groupTask?: GroupTask;
  /** The vote the message was about, after it. */
  vote?: Vote;
}

/**
 * What {@link GroupClient.watch} yields: the group as it stood when the
 * watch began (`snapshot`, once), each verified log event, a `heartbeat` on
 * an idle stream, and `reconnecting` before it resumes after a dropped
 * connection.
 */
export type GroupWatchItem =
  | { kind: "snapshot"; group: Group }
  | { kind: "event"; event: VerifiedGroupEvent }
  | { kind: "heartbeat" }
  | { kind: "reconnecting"; attempt: number; fromSequence: number; error: ConnectError };

/** A group task, for {@link GroupClient.submitTask}. */
export interface GroupTaskInput {
  /** Its id in the group; default a new UUID. Sub-tasks are `<id>.<slot>.<attempt>`. */
  groupTaskId?: string;
  /** The P2P task type every sub-task has. */
  taskType: string;
  /** Every sub-task's payload (broadcast, quorum), or the fields all shards share (shard). */
  payload?: JsonObject;
  /** Broadcast to every member, shards dealt to members, or done when a quorum completed. */
  strategy: GroupTaskStrategy;
  /** Shard: one sub-task input per entry (1 to 256). */
  shards?: JsonObject[];
  /** Quorum: how many sub-tasks must complete; default a majority of the assigned members. */
  quorum?: number;
  /** The agent ids to assign, in order; default every member with an endpoint. */
  members?: string[];
  /** How long each sub-task may take before it counts as failed; default 300 s. */
  memberTimeoutMs?: number;
  /** Shard: attempts per shard across members; default min(3, members). */
  maxAttempts?: number;
  /** Make every sub-task confidential: sealed to each member's encryption key (docs/PROTOCOL.md §9). */
  confidential?: boolean;
}

/** A vote, for {@link GroupClient.startVote}. */
export interface VoteInput {
  /** Its id in the group; default a new UUID. */
  voteId?: string;
  /** The question, at most 4096 characters. */
  question: string;
  /** 2 to 32 distinct options; their order breaks the last ties of a ranked count. */
  options: string[];
  /** How the ballots decide: majority, supermajority, unanimous, weighted or ranked. */
  rule: ConsensusRule;
  /** Supermajority: the share of non-abstaining ballots needed; default 2/3. */
  threshold?: { numerator: number; denominator: number };
  /** The fewest ballots for any decision; default a majority of the eligible voters. */
  quorum?: number;
  /** Who may vote; default every coordinator and member when the vote starts. */
  eligibleVoters?: string[];
  /** When the vote closes (at most 30 days ahead). */
  deadline: Date;
}

/** Fields for a sub-task's need-info, or a decision for its need-human. */
export type SubtaskAnswer = { info: JsonObject } | { decision: { action: GroupDecisionAction; fields?: JsonObject; rejectionReason?: string } };

/** A ballot: one option, a ranking (ranked votes), or an abstention. */
export type BallotInput = { choice: string } | { ranking: string[] } | { abstain: true };
