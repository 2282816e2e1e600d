// Groups in SQLite: each commit one synchronous transaction (the group row
// at its expected version, its new events, parties, group tasks, votes and
// the message that caused it), in the database the task store uses.
import type Database from "better-sqlite3";
import { GroupStatus } from "../../../gen/synapse/v1/group_pb.js";
import type { GroupTask, Vote } from "../../../gen/synapse/v1/group_pb.js";
import { decodeTaskCursor, encodeTaskCursor } from "../cursor.js";
import {
  groupBytes,
  groupEventBytes,
  groupEventFromBytes,
  groupFromRow,
  groupTaskColumns,
  groupTaskFromBytes,
  messageColumns,
  voteColumns,
  voteFromBytes,
  type GroupRow,
} from "../group-codec.js";
import {
  groupParties,
  type GroupChange,
  type GroupChangeNotice,
  type GroupPage,
  type GroupRecord,
  type GroupStorage,
  type StoredGroupEvent,
} from "../group-storage.js";
import { checkSequences, recordOf } from "../memory/groups.js";
import { StoreConflictError } from "../store.js";

export class SqliteGroupStorage implements GroupStorage {
  readonly exclusive = true;
  private readonly listeners = new Set<(notice: GroupChangeNotice) => void>();
  private readonly sql;

  constructor(private readonly db: Database.Database) {
    this.sql = {
      get: db.prepare("SELECT * FROM groups WHERE group_id = ?"),
      insert: db.prepare(
        "INSERT INTO groups (group_id, record, version, last_sequence, status, created_at_ms, updated_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?)",
      ),
      update: db.prepare("UPDATE groups SET record = ?, version = ?, last_sequence = ?, status = ?, updated_at_ms = ? WHERE group_id = ? AND version = ?"),
      insertEvent: db.prepare("INSERT INTO group_events (group_id, sequence, envelope) VALUES (?, ?, ?)"),
      events: db.prepare("SELECT sequence, envelope FROM group_events WHERE group_id = ? AND sequence >= ? ORDER BY sequence LIMIT ?"),
      clearParties: db.prepare("DELETE FROM group_parties WHERE group_id = ?"),
      insertParty: db.prepare("INSERT INTO group_parties (agent_id, group_id) VALUES (?, ?)"),
      groupsOf: db.prepare(
        `SELECT g.* FROM group_parties p JOIN groups g ON g.group_id = p.group_id WHERE p.agent_id = ?
           AND (g.created_at_ms < ? OR (g.created_at_ms = ? AND g.group_id < ?))
         ORDER BY g.created_at_ms DESC, g.group_id DESC LIMIT ?`,
      ),
      upsertTask: db.prepare(
        `INSERT INTO group_tasks (group_id, group_task_id, record, active, created_at_ms) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (group_id, group_task_id) DO UPDATE SET record = excluded.record, active = excluded.active`,
      ),
      getTask: db.prepare("SELECT record FROM group_tasks WHERE group_id = ? AND group_task_id = ?"),
      taskIds: db.prepare("SELECT group_task_id FROM group_tasks WHERE group_id = ? ORDER BY created_at_ms, group_task_id"),
      activeTasks: db.prepare("SELECT record FROM group_tasks WHERE active = 1 ORDER BY created_at_ms LIMIT ?"),
      upsertVote: db.prepare(
        `INSERT INTO group_votes (group_id, vote_id, record, open, deadline_ms, created_at_ms) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (group_id, vote_id) DO UPDATE SET record = excluded.record, open = excluded.open`,
      ),
      getVote: db.prepare("SELECT record FROM group_votes WHERE group_id = ? AND vote_id = ?"),
      voteIds: db.prepare("SELECT vote_id FROM group_votes WHERE group_id = ? ORDER BY created_at_ms, vote_id"),
      openVotes: db.prepare("SELECT record FROM group_votes WHERE open = 1 ORDER BY deadline_ms LIMIT ?"),
      insertMessage: db.prepare(
        `INSERT INTO seen_messages (scope, message_id, sender_agent_id, digest, keep_until_ms, task_id, reply)
         VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
      ),
      dissolved: db.prepare(`SELECT group_id FROM groups WHERE status = ${GroupStatus.DISSOLVED} AND updated_at_ms < ? LIMIT ?`),
      deleteGroup: ["groups", "group_events", "group_parties", "group_tasks", "group_votes"].map((table) => db.prepare(`DELETE FROM ${table} WHERE group_id = ?`)),
    };
  }

  async createGroup(change: GroupChange): Promise<GroupRecord> {
    const record = recordOf(change, 1, change.atMs);
    this.db.transaction(() => {
      checkSequences(change, 0);
      if (this.sql.get.get(record.groupId) !== undefined) throw new StoreConflictError("group_exists", `group ${record.groupId} exists`);
      this.sql.insert.run(record.groupId, groupBytes(record), 1, record.lastSequence, record.group.status, record.createdAtMs, record.updatedAtMs);
      this.write(record, change);
    })();
    this.announce(record, change);
    return record;
  }

  async getGroup(groupId: string): Promise<GroupRecord | undefined> {
    const row = this.sql.get.get(groupId) as GroupRow | undefined;
    return row === undefined ? undefined : groupFromRow(row);
  }

  async commitGroup(groupId: string, expectedVersion: number, change: GroupChange): Promise<GroupRecord> {
    const record = this.db.transaction(() => {
      const row = this.sql.get.get(groupId) as GroupRow | undefined;
      if (row === undefined) throw new StoreConflictError("missing", `group ${groupId} does not exist`);
      if (row.version !== expectedVersion) throw new StoreConflictError("version", `group ${groupId} is at version ${row.version}, not ${expectedVersion}`);
      checkSequences(change, row.last_sequence);
      const next = recordOf(change, expectedVersion + 1, row.created_at_ms);
      this.sql.update.run(groupBytes(next), next.version, next.lastSequence, next.group.status, next.updatedAtMs, groupId, expectedVersion);
      this.write(next, change);
      return next;
    })();
    this.announce(record, change);
    return record;
  }

  /** Everything of a commit but the group row; inside its transaction. */
  private write(record: GroupRecord, change: GroupChange): void {
    if (change.message !== undefined && this.sql.insertMessage.run(...messageColumns(change.message)).changes === 0) {
      throw new StoreConflictError("message", `message ${change.message.messageId} was already processed`);
    }
    for (const event of change.events) this.sql.insertEvent.run(record.groupId, event.sequence, groupEventBytes(event));
    this.sql.clearParties.run(record.groupId);
    for (const agentId of groupParties(record.group)) this.sql.insertParty.run(agentId, record.groupId);
    for (const task of change.groupTasks ?? []) {
      const columns = groupTaskColumns(task);
      this.sql.upsertTask.run(record.groupId, task.groupTaskId, columns.record, columns.active, columns.createdAtMs);
    }
    for (const vote of change.votes ?? []) {
      const columns = voteColumns(vote);
      this.sql.upsertVote.run(record.groupId, vote.voteId, columns.record, columns.open, columns.deadlineMs, columns.createdAtMs);
    }
  }

  private announce(record: GroupRecord, change: GroupChange): void {
    const notice: GroupChangeNotice = { groupId: record.groupId, lastSequence: record.lastSequence, events: change.events, record, groupTasks: change.groupTasks, votes: change.votes };
    for (const listener of this.listeners) {
      try {
        listener(notice);
      } catch {
        // A listener's failure is its own.
      }
    }
  }

  async listGroupEvents(groupId: string, fromSequence: number, limit = -1): Promise<StoredGroupEvent[]> {
    const rows = this.sql.events.all(groupId, fromSequence, limit) as Array<{ sequence: number; envelope: Buffer }>;
    return rows.map((row) => groupEventFromBytes(groupId, row.sequence, row.envelope));
  }

  async listGroupsOf(agentId: string, pageSize: number, pageToken?: string): Promise<GroupPage> {
    const cursor = pageToken ? decodeTaskCursor(pageToken) : { createdAtMs: Number.MAX_SAFE_INTEGER, taskId: "" };
    const rows = this.sql.groupsOf.all(agentId, cursor.createdAtMs, cursor.createdAtMs, pageToken ? cursor.taskId : "\uffff", pageSize + 1) as GroupRow[];
    const groups = rows.slice(0, pageSize).map(groupFromRow);
    const last = groups[groups.length - 1];
    return { groups, nextPageToken: rows.length > pageSize && last ? encodeTaskCursor({ createdAtMs: last.createdAtMs, taskId: last.groupId }) : "" };
  }

  async getGroupTask(groupId: string, groupTaskId: string): Promise<GroupTask | undefined> {
    const row = this.sql.getTask.get(groupId, groupTaskId) as { record: Buffer } | undefined;
    return row === undefined ? undefined : groupTaskFromBytes(row.record);
  }

  async getVote(groupId: string, voteId: string): Promise<Vote | undefined> {
    const row = this.sql.getVote.get(groupId, voteId) as { record: Buffer } | undefined;
    return row === undefined ? undefined : voteFromBytes(row.record);
  }

  async listGroupItems(groupId: string): Promise<{ groupTaskIds: string[]; voteIds: string[] }> {
    return {
      groupTaskIds: (this.sql.taskIds.all(groupId) as Array<{ group_task_id: string }>).map((row) => row.group_task_id),
      voteIds: (this.sql.voteIds.all(groupId) as Array<{ vote_id: string }>).map((row) => row.vote_id),
    };
  }

  async listActiveGroupTasks(limit: number): Promise<GroupTask[]> {
    return (this.sql.activeTasks.all(limit) as Array<{ record: Buffer }>).map((row) => groupTaskFromBytes(row.record));
  }

  async listOpenVotes(limit: number): Promise<Vote[]> {
    return (this.sql.openVotes.all(limit) as Array<{ record: Buffer }>).map((row) => voteFromBytes(row.record));
  }

  async pruneGroups(beforeMs: number, limit: number): Promise<number> {
    return this.db.transaction(() => {
      const ids = (this.sql.dissolved.all(beforeMs, limit) as Array<{ group_id: string }>).map((row) => row.group_id);
      for (const id of ids) for (const statement of this.sql.deleteGroup) statement.run(id);
      return ids.length;
    })();
  }

  onGroupChange(listener: (notice: GroupChangeNotice) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
