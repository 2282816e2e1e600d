// What a group host keeps (A2N): each group as one aggregate (its record,
// its gapless signed event log, its group tasks and its votes), changed only
// by commits that name the version they expect, with the message that
// caused the change remembered in the same commit (replay memory, scope
// "a2n"). Memory, SQLite and PostgreSQL implement it alike.
import type { Envelope, Header } from "../../gen/synapse/v1/envelope_pb.js";
import type { GroupEventPayload } from "../../gen/synapse/v1/a2n_pb.js";
import type { Group, GroupTask, Vote } from "../../gen/synapse/v1/group_pb.js";
import type { SeenMessage } from "./store.js";

/** A group as stored: the view itself, and the version commits are checked against. */
export interface GroupRecord {
  readonly groupId: string;
  /** The group as GetGroup shows it; its last_sequence equals lastSequence. */
  readonly group: Group;
  /** Incremented by every commit. */
  readonly version: number;
  /** Sequence of the latest event; the next is lastSequence + 1. */
  readonly lastSequence: number;
  readonly createdAtMs: number;
  readonly updatedAtMs: number;
}

/** One entry of a group's log: the host's signed a2n:group_event. */
export interface StoredGroupEvent {
  readonly groupId: string;
  readonly sequence: number;
  readonly envelope: Envelope;
  readonly header: Header;
  readonly payload: GroupEventPayload;
}

/** Everything one commit writes; a throw before it changes nothing. */
export interface GroupChange {
  /** The group after the change. */
  readonly group: Group;
  /** New events, numbered lastSequence + 1, + 2, … */
  readonly events: readonly StoredGroupEvent[];
  /** Group tasks to insert or replace. */
  readonly groupTasks?: readonly GroupTask[];
  /** Votes to insert or replace. */
  readonly votes?: readonly Vote[];
  /** The message that caused it, remembered in the same commit. */
  readonly message?: SeenMessage;
  /** Milliseconds since the epoch of the change. */
  readonly atMs: number;
}

/** Agents who may read a group: its members and those with a pending membership. */
export function groupParties(group: Group): string[] {
  const ids = new Set<string>();
  for (const member of group.members) if (member.agent) ids.add(member.agent.agentId);
  for (const pending of group.pending) if (pending.agent) ids.add(pending.agent.agentId);
  return [...ids];
}

export interface GroupPage {
  groups: GroupRecord[];
  nextPageToken: string;
}

/** A committed change, as listeners hear of it (events present when this process committed them). */
export interface GroupChangeNotice {
  readonly groupId: string;
  readonly lastSequence: number;
  readonly events?: readonly StoredGroupEvent[];
  readonly record?: GroupRecord;
  readonly groupTasks?: readonly GroupTask[];
  readonly votes?: readonly Vote[];
}

export interface GroupStorage {
  /** Whether one process owns the storage; otherwise readers also poll for other instances' commits. */
  readonly exclusive: boolean;
  /** Inserts a group with its first events (from sequence 1); StoreConflictError "group_exists" or "message". */
  createGroup(change: GroupChange): Promise<GroupRecord>;
  getGroup(groupId: string): Promise<GroupRecord | undefined>;
  /**
   * Applies a change if the group is still at expectedVersion; otherwise
   * StoreConflictError ("missing", "version", "sequence", "message") and
   * nothing changes.
   */
  commitGroup(groupId: string, expectedVersion: number, change: GroupChange): Promise<GroupRecord>;
  /** Events with sequence >= fromSequence, in order, at most `limit` (default all). */
  listGroupEvents(groupId: string, fromSequence: number, limit?: number): Promise<StoredGroupEvent[]>;
  /** The groups `agentId` may read, newest first. RangeError for a token not issued here. */
  listGroupsOf(agentId: string, pageSize: number, pageToken?: string): Promise<GroupPage>;
  getGroupTask(groupId: string, groupTaskId: string): Promise<GroupTask | undefined>;
  getVote(groupId: string, voteId: string): Promise<Vote | undefined>;
  /** Ids of a group's group tasks and votes, oldest first. */
  listGroupItems(groupId: string): Promise<{ groupTaskIds: string[]; voteIds: string[] }>;
  /** Group tasks still running or waiting, oldest first (resumed when a host starts). */
  listActiveGroupTasks(limit: number): Promise<GroupTask[]>;
  /** Open votes, soonest deadline first. */
  listOpenVotes(limit: number): Promise<Vote[]>;
  /** Drops dissolved groups last changed before `beforeMs`, with everything of theirs; at most `limit`. */
  pruneGroups(beforeMs: number, limit: number): Promise<number>;
  /** Calls `listener` after every commit this process makes; returns the unsubscribe function. */
  onGroupChange(listener: (notice: GroupChangeNotice) => void): () => void;
}
