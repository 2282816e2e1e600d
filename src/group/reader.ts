// Reading groups: a group, its tasks and votes are visible to its parties
// (members, and agents with a pending invitation or join request); to
// anyone else it does not exist. WatchGroup streams the signed log from a
// sequence, then new events as they are committed (this process announces
// its own commits; a store shared with other instances is also polled),
// with a signed heartbeat when idle.
import { GroupEventKind } from "../../gen/synapse/v1/a2n_pb.js";
import { GroupStatus, type Group, type GroupTask, type Vote } from "../../gen/synapse/v1/group_pb.js";
import { groupParties, type GroupRecord, type GroupStorage, type StoredGroupEvent } from "../store/group-storage.js";
import type { StoredReply } from "../store/store.js";
import { invalidParams, notFound } from "./rules.js";
import { describeTally } from "./tally.js";
import { tallyOf } from "./votes.js";

export type GroupWatchItem = { kind: "snapshot"; group: Group } | { kind: "event"; event: StoredGroupEvent } | { kind: "heartbeat"; heartbeat: StoredReply };

export interface GroupReaderOptions {
  storage: GroupStorage;
  heartbeatIntervalMs: number;
  /** A signed p2p:heartbeat for the watcher. */
  heartbeat: (agentId: string) => Promise<StoredReply>;
  /** How often a shared store is looked at for other instances' commits (default 1 s). */
  pollIntervalMs?: number;
}

const BATCH = 500;
const LEAVING = new Set([GroupEventKind.MEMBER_LEFT, GroupEventKind.MEMBER_REMOVED, GroupEventKind.MEMBERSHIP_WITHDRAWN]);

/** The groups a ListGroups page holds for a requested page_size (0 or less: the default). */
export function groupPageSize(requested: number): number {
  return requested <= 0 ? 50 : Math.min(requested, 500);
}

export class GroupReader {
  constructor(private readonly options: GroupReaderOptions) {}

  /** The group, if `agentId` may read it; NOT_FOUND otherwise, exactly as for a group that does not exist. */
  async party(groupId: string, agentId: string): Promise<GroupRecord> {
    const record = await this.options.storage.getGroup(groupId);
    if (record === undefined || !groupParties(record.group).includes(agentId)) throw notFound("group", groupId);
    return record;
  }

  async getGroup(groupId: string, agentId: string): Promise<{ group: Group; groupTaskIds: string[]; voteIds: string[] }> {
    const record = await this.party(groupId, agentId);
    return { group: record.group, ...(await this.options.storage.listGroupItems(groupId)) };
  }

  async listGroups(agentId: string, pageSize: number, pageToken: string): Promise<{ groups: Group[]; nextPageToken: string }> {
    const size = groupPageSize(pageSize);
    try {
      const page = await this.options.storage.listGroupsOf(agentId, size, pageToken || undefined);
      return { groups: page.groups.map((record) => record.group), nextPageToken: page.nextPageToken };
    } catch (error) {
      if (error instanceof RangeError) throw invalidParams(error.message, { field: "page_token" });
      throw error;
    }
  }

  async getGroupTask(groupId: string, groupTaskId: string, agentId: string): Promise<GroupTask> {
    await this.party(groupId, agentId);
    const task = await this.options.storage.getGroupTask(groupId, groupTaskId);
    if (task === undefined) throw notFound("group task", groupTaskId, groupId);
    return task;
  }

  async getVote(groupId: string, voteId: string, agentId: string): Promise<Vote> {
    await this.party(groupId, agentId);
    const vote = await this.options.storage.getVote(groupId, voteId);
    if (vote === undefined) throw notFound("vote", voteId, groupId);
    return vote;
  }

  /** The vote's count (interim while open: counted now, as if it closed) and what it is counted from. */
  async tally(groupId: string, voteId: string, agentId: string) {
    const vote = await this.getVote(groupId, voteId, agentId);
    const tally = vote.tally?.final ? vote.tally : tallyOf(vote);
    return { vote, tally, summary: describeTally(tally) };
  }

  async *watch(groupId: string, agentId: string, fromSequence: number, signal: AbortSignal): AsyncGenerator<GroupWatchItem> {
    const { storage } = this.options;
    yield { kind: "snapshot", group: (await this.party(groupId, agentId)).group };
    let next = Math.max(1, fromSequence);
    let changed = false;
    let wake: (() => void) | undefined;
    const poke = () => {
      changed = true;
      wake?.();
    };
    const unsubscribe = storage.onGroupChange((notice) => notice.groupId === groupId && poke());
    const poller = storage.exclusive ? undefined : setInterval(poke, this.options.pollIntervalMs ?? 1000);
    poller?.unref();
    signal.addEventListener("abort", poke);
    try {
      while (!signal.aborted) {
        changed = false;
        const events = await storage.listGroupEvents(groupId, next, BATCH);
        const record = await storage.getGroup(groupId);
        const stillParty = record !== undefined && groupParties(record.group).includes(agentId);
        for (const event of events) {
          yield { kind: "event", event };
          next = event.sequence + 1;
          // A member that leaves (or is removed) sees its own departure, and nothing after it.
          if (!stillParty && LEAVING.has(event.payload.kind) && event.payload.member?.agent?.agentId === agentId) return;
        }
        if (events.length === BATCH) continue;
        if (!stillParty) return;
        if (record.group.status === GroupStatus.DISSOLVED && next > record.lastSequence) return;
        if (changed) continue;
        const idle = await new Promise<boolean>((resolve) => {
          const timer = setTimeout(() => resolve(true), this.options.heartbeatIntervalMs);
          timer.unref();
          wake = () => {
            clearTimeout(timer);
            resolve(false);
          };
          if (changed || signal.aborted) wake();
        });
        wake = undefined;
        if (idle && !signal.aborted) yield { kind: "heartbeat", heartbeat: await this.options.heartbeat(agentId) };
      }
    } finally {
      unsubscribe();
      if (poller !== undefined) clearInterval(poller);
      signal.removeEventListener("abort", poke);
    }
  }
}
