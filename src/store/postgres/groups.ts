// Groups in PostgreSQL, shared by the instances of one host: each commit
// one transaction that first moves the group row from its expected version
// (so concurrent commits to one group serialize, and the loser changes
// nothing), then writes the events, parties, group tasks, votes and the
// message that caused it. Other instances' commits are not announced here;
// readers of a shared store poll (see src/group/reader.ts).
import type pg from "pg";
import { GroupStatus, type GroupTask, type Vote } from "../../../gen/synapse/v1/group_pb.js";
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
import { brokenConstraint, transaction, type Database } from "./database.js";

export class PostgresGroupStorage implements GroupStorage {
  readonly exclusive = false;
  private readonly listeners = new Set<(notice: GroupChangeNotice) => void>();

  constructor(private readonly pool: Database) {}

  async createGroup(change: GroupChange): Promise<GroupRecord> {
    checkSequences(change, 0);
    const record = recordOf(change, 1, change.atMs);
    await this.run(async (client) => {
      const inserted = await client.query(
        `INSERT INTO groups (group_id, record, version, last_sequence, status, created_at_ms, updated_at_ms)
         VALUES ($1, $2, 1, $3, $4, $5, $6) ON CONFLICT DO NOTHING`,
        [record.groupId, groupBytes(record), record.lastSequence, record.group.status, record.createdAtMs, record.updatedAtMs],
      );
      if (inserted.rowCount === 0) throw new StoreConflictError("group_exists", `group ${record.groupId} exists`);
      await this.write(client, record, change);
    });
    this.announce(record, change);
    return record;
  }

  async getGroup(groupId: string): Promise<GroupRecord | undefined> {
    const { rows } = await this.pool.query<GroupRow>("SELECT * FROM groups WHERE group_id = $1", [groupId]);
    return rows[0] === undefined ? undefined : groupFromRow(rows[0]);
  }

  async commitGroup(groupId: string, expectedVersion: number, change: GroupChange): Promise<GroupRecord> {
    const record = await this.run(async (client) => {
      const { rows } = await client.query<GroupRow>("SELECT * FROM groups WHERE group_id = $1 FOR UPDATE", [groupId]);
      const row = rows[0];
      if (row === undefined) throw new StoreConflictError("missing", `group ${groupId} does not exist`);
      if (row.version !== expectedVersion) throw new StoreConflictError("version", `group ${groupId} is at version ${row.version}, not ${expectedVersion}`);
      checkSequences(change, row.last_sequence);
      const next = recordOf(change, expectedVersion + 1, Number(row.created_at_ms));
      await client.query("UPDATE groups SET record = $1, version = $2, last_sequence = $3, status = $4, updated_at_ms = $5 WHERE group_id = $6", [
        groupBytes(next),
        next.version,
        next.lastSequence,
        next.group.status,
        next.updatedAtMs,
        groupId,
      ]);
      await this.write(client, next, change);
      return next;
    });
    this.announce(record, change);
    return record;
  }

  /** A transaction whose unique-constraint failures are the conflicts they mean. */
  private async run<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    try {
      return await transaction(this.pool, work);
    } catch (error) {
      const constraint = brokenConstraint(error);
      if (constraint === "seen_messages_pkey") throw new StoreConflictError("message", "the message was already processed");
      if (constraint === "group_events_pkey") throw new StoreConflictError("sequence", "an event with that sequence exists");
      if (constraint === "groups_pkey") throw new StoreConflictError("group_exists", "the group id is in use");
      throw error;
    }
  }

  private async write(client: pg.PoolClient, record: GroupRecord, change: GroupChange): Promise<void> {
    if (change.message !== undefined) {
      await client.query("INSERT INTO seen_messages (scope, message_id, sender_agent_id, digest, keep_until_ms, task_id, reply) VALUES ($1, $2, $3, $4, $5, $6, $7)", messageColumns(change.message));
    }
    for (const event of change.events) {
      await client.query("INSERT INTO group_events (group_id, sequence, envelope) VALUES ($1, $2, $3)", [record.groupId, event.sequence, groupEventBytes(event)]);
    }
    await client.query("DELETE FROM group_parties WHERE group_id = $1", [record.groupId]);
    const parties = groupParties(record.group);
    if (parties.length > 0) {
      await client.query("INSERT INTO group_parties (agent_id, group_id) SELECT unnest($1::text[]), $2", [parties, record.groupId]);
    }
    for (const task of change.groupTasks ?? []) {
      const columns = groupTaskColumns(task);
      await client.query(
        `INSERT INTO group_tasks (group_id, group_task_id, record, active, created_at_ms) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (group_id, group_task_id) DO UPDATE SET record = excluded.record, active = excluded.active`,
        [record.groupId, task.groupTaskId, columns.record, columns.active, columns.createdAtMs],
      );
    }
    for (const vote of change.votes ?? []) {
      const columns = voteColumns(vote);
      await client.query(
        `INSERT INTO group_votes (group_id, vote_id, record, open, deadline_ms, created_at_ms) VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (group_id, vote_id) DO UPDATE SET record = excluded.record, open = excluded.open`,
        [record.groupId, vote.voteId, columns.record, columns.open, columns.deadlineMs, columns.createdAtMs],
      );
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

  async listGroupEvents(groupId: string, fromSequence: number, limit?: number): Promise<StoredGroupEvent[]> {
    const { rows } = await this.pool.query<{ sequence: number; envelope: Buffer }>(
      "SELECT sequence, envelope FROM group_events WHERE group_id = $1 AND sequence >= $2 ORDER BY sequence LIMIT $3",
      [groupId, fromSequence, limit ?? null],
    );
    return rows.map((row) => groupEventFromBytes(groupId, row.sequence, row.envelope));
  }

  async listGroupsOf(agentId: string, pageSize: number, pageToken?: string): Promise<GroupPage> {
    const cursor = pageToken ? decodeTaskCursor(pageToken) : undefined;
    const { rows } = await this.pool.query<GroupRow>(
      `SELECT g.* FROM group_parties p JOIN groups g ON g.group_id = p.group_id WHERE p.agent_id = $1
         AND ($2::bigint IS NULL OR g.created_at_ms < $2 OR (g.created_at_ms = $2 AND g.group_id < $3))
       ORDER BY g.created_at_ms DESC, g.group_id DESC LIMIT $4`,
      [agentId, cursor?.createdAtMs ?? null, cursor?.taskId ?? "", pageSize + 1],
    );
    const groups = rows.slice(0, pageSize).map(groupFromRow);
    const last = groups[groups.length - 1];
    return { groups, nextPageToken: rows.length > pageSize && last ? encodeTaskCursor({ createdAtMs: last.createdAtMs, taskId: last.groupId }) : "" };
  }

  async getGroupTask(groupId: string, groupTaskId: string): Promise<GroupTask | undefined> {
    const { rows } = await this.pool.query<{ record: Buffer }>("SELECT record FROM group_tasks WHERE group_id = $1 AND group_task_id = $2", [groupId, groupTaskId]);
    return rows[0] === undefined ? undefined : groupTaskFromBytes(rows[0].record);
  }

  async getVote(groupId: string, voteId: string): Promise<Vote | undefined> {
    const { rows } = await this.pool.query<{ record: Buffer }>("SELECT record FROM group_votes WHERE group_id = $1 AND vote_id = $2", [groupId, voteId]);
    return rows[0] === undefined ? undefined : voteFromBytes(rows[0].record);
  }

  async listGroupItems(groupId: string): Promise<{ groupTaskIds: string[]; voteIds: string[] }> {
    const tasks = await this.pool.query<{ id: string }>("SELECT group_task_id AS id FROM group_tasks WHERE group_id = $1 ORDER BY created_at_ms, group_task_id", [groupId]);
    const votes = await this.pool.query<{ id: string }>("SELECT vote_id AS id FROM group_votes WHERE group_id = $1 ORDER BY created_at_ms, vote_id", [groupId]);
    return { groupTaskIds: tasks.rows.map((row) => row.id), voteIds: votes.rows.map((row) => row.id) };
  }

  async listActiveGroupTasks(limit: number): Promise<GroupTask[]> {
    const { rows } = await this.pool.query<{ record: Buffer }>("SELECT record FROM group_tasks WHERE active = 1 ORDER BY created_at_ms LIMIT $1", [limit]);
    return rows.map((row) => groupTaskFromBytes(row.record));
  }

  async listOpenVotes(limit: number): Promise<Vote[]> {
    const { rows } = await this.pool.query<{ record: Buffer }>("SELECT record FROM group_votes WHERE open = 1 ORDER BY deadline_ms LIMIT $1", [limit]);
    return rows.map((row) => voteFromBytes(row.record));
  }

  async pruneGroups(beforeMs: number, limit: number): Promise<number> {
    return transaction(this.pool, async (client) => {
      const { rows } = await client.query<{ group_id: string }>(
        `DELETE FROM groups WHERE group_id IN (SELECT group_id FROM groups WHERE status = ${GroupStatus.DISSOLVED} AND updated_at_ms < $1 LIMIT $2) RETURNING group_id`,
        [beforeMs, limit],
      );
      const ids = rows.map((row) => row.group_id);
      if (ids.length === 0) return 0;
      for (const table of ["group_events", "group_parties", "group_tasks", "group_votes"]) {
        await client.query(`DELETE FROM ${table} WHERE group_id = ANY($1)`, [ids]);
      }
      return ids.length;
    });
  }

  onGroupChange(listener: (notice: GroupChangeNotice) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
