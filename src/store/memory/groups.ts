// Groups held in this process's memory (tests and embedding). Each method
// runs to its end without awaiting, so a commit is atomic; the replay
// memory is the task store's, so a message is remembered once whichever
// service took it.
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { GroupTaskState } from "../../../gen/synapse/v1/a2n_pb.js";
import { GroupStatus, VoteState, type GroupTask, type Vote } from "../../../gen/synapse/v1/group_pb.js";
import { decodeTaskCursor, encodeTaskCursor } from "../cursor.js";
import {
  groupParties,
  type GroupChange,
  type GroupChangeNotice,
  type GroupPage,
  type GroupRecord,
  type GroupStorage,
  type StoredGroupEvent,
} from "../group-storage.js";
import { StoreConflictError } from "../store.js";
import type { MemoryTaskStore } from "./tasks.js";

interface Entry {
  record: GroupRecord;
  events: StoredGroupEvent[];
  tasks: Map<string, GroupTask>;
  votes: Map<string, Vote>;
}

export const isActiveGroupTask = (task: GroupTask) => task.state === GroupTaskState.RUNNING || task.state === GroupTaskState.WAITING;

export class MemoryGroupStorage implements GroupStorage {
  readonly exclusive = true;
  private readonly groups = new Map<string, Entry>();
  private readonly listeners = new Set<(notice: GroupChangeNotice) => void>();

  constructor(private readonly messages: MemoryTaskStore) {}

  async createGroup(change: GroupChange): Promise<GroupRecord> {
    const groupId = change.group.groupId;
    if (this.groups.has(groupId)) throw new StoreConflictError("group_exists", `group ${groupId} exists`);
    checkSequences(change, 0);
    this.checkMessage(change);
    const record = recordOf(change, 1, change.atMs);
    const entry: Entry = { record, events: [...change.events], tasks: new Map(), votes: new Map() };
    this.groups.set(groupId, entry);
    this.apply(entry, change);
    return record;
  }

  async getGroup(groupId: string): Promise<GroupRecord | undefined> {
    return this.groups.get(groupId)?.record;
  }

  async commitGroup(groupId: string, expectedVersion: number, change: GroupChange): Promise<GroupRecord> {
    const entry = this.groups.get(groupId);
    if (entry === undefined) throw new StoreConflictError("missing", `group ${groupId} does not exist`);
    if (entry.record.version !== expectedVersion) {
      throw new StoreConflictError("version", `group ${groupId} is at version ${entry.record.version}, not ${expectedVersion}`);
    }
    checkSequences(change, entry.record.lastSequence);
    this.checkMessage(change);
    entry.record = recordOf(change, expectedVersion + 1, entry.record.createdAtMs);
    entry.events.push(...change.events);
    this.apply(entry, change);
    return entry.record;
  }

  private checkMessage(change: GroupChange): void {
    const message = change.message;
    if (message !== undefined && this.messages.hasMessage(message.scope, message.messageId)) {
      throw new StoreConflictError("message", `message ${message.messageId} was already processed`);
    }
  }

  private apply(entry: Entry, change: GroupChange): void {
    for (const task of change.groupTasks ?? []) entry.tasks.set(task.groupTaskId, task);
    for (const vote of change.votes ?? []) entry.votes.set(vote.voteId, vote);
    if (change.message !== undefined) this.messages.putMessage(change.message);
    const notice: GroupChangeNotice = {
      groupId: entry.record.groupId,
      lastSequence: entry.record.lastSequence,
      events: change.events,
      record: entry.record,
      groupTasks: change.groupTasks,
      votes: change.votes,
    };
    for (const listener of this.listeners) {
      try {
        listener(notice);
      } catch {
        // A listener's failure is its own.
      }
    }
  }

  async listGroupEvents(groupId: string, fromSequence: number, limit = Number.MAX_SAFE_INTEGER): Promise<StoredGroupEvent[]> {
    const events = this.groups.get(groupId)?.events ?? [];
    return events.slice(Math.max(0, fromSequence - 1), Math.max(0, fromSequence - 1) + limit);
  }

  async listGroupsOf(agentId: string, pageSize: number, pageToken?: string): Promise<GroupPage> {
    const cursor = pageToken ? decodeTaskCursor(pageToken) : undefined;
    const mine = [...this.groups.values()]
      .map((entry) => entry.record)
      .filter((record) => groupParties(record.group).includes(agentId))
      .sort((a, b) => b.createdAtMs - a.createdAtMs || (a.groupId < b.groupId ? 1 : -1))
      .filter((record) => cursor === undefined || record.createdAtMs < cursor.createdAtMs || (record.createdAtMs === cursor.createdAtMs && record.groupId < cursor.taskId));
    const page = mine.slice(0, pageSize);
    const last = page[page.length - 1];
    return { groups: page, nextPageToken: mine.length > pageSize && last ? encodeTaskCursor({ createdAtMs: last.createdAtMs, taskId: last.groupId }) : "" };
  }

  async getGroupTask(groupId: string, groupTaskId: string): Promise<GroupTask | undefined> {
    return this.groups.get(groupId)?.tasks.get(groupTaskId);
  }

  async getVote(groupId: string, voteId: string): Promise<Vote | undefined> {
    return this.groups.get(groupId)?.votes.get(voteId);
  }

  async listGroupItems(groupId: string): Promise<{ groupTaskIds: string[]; voteIds: string[] }> {
    const entry = this.groups.get(groupId);
    const oldestFirst = <T>(items: Iterable<T>, at: (item: T) => number, id: (item: T) => string) =>
      [...items].sort((a, b) => at(a) - at(b) || (id(a) < id(b) ? -1 : 1)).map(id);
    return {
      groupTaskIds: oldestFirst(entry?.tasks.values() ?? [], createdMs, (task) => task.groupTaskId),
      voteIds: oldestFirst(entry?.votes.values() ?? [], (vote) => (vote.createdAt ? timestampMs(vote.createdAt) : 0), (vote) => vote.voteId),
    };
  }

  async listActiveGroupTasks(limit: number): Promise<GroupTask[]> {
    const out: GroupTask[] = [];
    for (const entry of this.groups.values()) for (const task of entry.tasks.values()) if (isActiveGroupTask(task)) out.push(task);
    return out.sort((a, b) => createdMs(a) - createdMs(b)).slice(0, limit);
  }

  async listOpenVotes(limit: number): Promise<Vote[]> {
    const out: Vote[] = [];
    for (const entry of this.groups.values()) for (const vote of entry.votes.values()) if (vote.state === VoteState.OPEN) out.push(vote);
    return out.sort((a, b) => deadlineMs(a) - deadlineMs(b)).slice(0, limit);
  }

  async pruneGroups(beforeMs: number, limit: number): Promise<number> {
    let dropped = 0;
    for (const [groupId, entry] of this.groups) {
      if (dropped >= limit) break;
      if (entry.record.group.status !== GroupStatus.DISSOLVED || entry.record.updatedAtMs >= beforeMs) continue;
      this.groups.delete(groupId);
      dropped++;
    }
    return dropped;
  }

  onGroupChange(listener: (notice: GroupChangeNotice) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

/** Refuses events that do not continue the log without a gap. */
export function checkSequences(change: GroupChange, lastSequence: number): void {
  change.events.forEach((event, index) => {
    if (event.sequence !== lastSequence + index + 1 || event.groupId !== change.group.groupId) {
      throw new StoreConflictError("sequence", `event sequence ${event.sequence} does not follow ${lastSequence + index}`);
    }
  });
  if (Number(change.group.lastSequence) !== lastSequence + change.events.length) {
    throw new StoreConflictError("sequence", `the group's last_sequence ${change.group.lastSequence} is not ${lastSequence + change.events.length}`);
  }
}

export function recordOf(change: GroupChange, version: number, createdAtMs: number): GroupRecord {
  return {
    groupId: change.group.groupId,
    group: change.group,
    version,
    lastSequence: Number(change.group.lastSequence),
    createdAtMs,
    updatedAtMs: change.atMs,
  };
}

export const createdMs = (task: GroupTask) => (task.createdAt ? timestampMs(task.createdAt) : 0);
export const deadlineMs = (vote: Vote) => (vote.deadline ? timestampMs(vote.deadline) : 0);
