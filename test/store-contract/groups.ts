// The group part of the Store contract (A2N): a group's commits are checked
// against its version and continue its log without gaps; the message that
// caused a commit is remembered in it or not at all; group tasks, votes
// and the parties who may read a group are kept with it; dissolved groups
// are pruned whole; durable stores keep it all across a reopen.
import { create, toBinary } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { expect, it } from "vitest";
import { GroupEventKind, GroupEventPayloadSchema, GroupRole, GroupTaskState } from "../../gen/synapse/v1/a2n_pb.js";
import { EnvelopeSchema, MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import { GroupSchema, GroupStatus, GroupTaskSchema, PendingKind, VoteSchema, VoteState, type Group } from "../../gen/synapse/v1/group_pb.js";
import { generateKey } from "../../src/crypto/keys.js";
import { seal } from "../../src/envelope/seal.js";
import type { GroupChange, GroupChangeNotice, StoredGroupEvent } from "../../src/store/group-storage.js";
import type { Storage } from "../../src/store/storage.js";
import { signedReply } from "./fixtures.js";

const key = generateKey();
const host = { agentId: "host", systemId: "sys", keyId: key.keyId };

function group(groupId: string, lastSequence: number, members: string[], pending: string[] = [], status = GroupStatus.ACTIVE): Group {
  return create(GroupSchema, {
    groupId,
    name: `group ${groupId}`,
    host,
    status,
    lastSequence: BigInt(lastSequence),
    members: members.map((agentId) => ({ agent: { agentId }, role: GroupRole.MEMBER, weight: 1 })),
    pending: pending.map((agentId) => ({ kind: PendingKind.INVITATION, agent: { agentId }, role: GroupRole.MEMBER })),
  });
}

function event(groupId: string, sequence: number): StoredGroupEvent {
  const payload = create(GroupEventPayloadSchema, { groupId, kind: GroupEventKind.MEMBER_INVITED, reason: `event ${sequence}` });
  const { envelope, header } = seal(
    { messageType: MessageType.A2N_GROUP_EVENT, payload, sender: host, receiver: { agentId: groupId }, sequence: BigInt(sequence), sentAtMs: 5_000 + sequence },
    key,
  );
  return { groupId, sequence, envelope, header, payload };
}

function change(groupId: string, from: number, count: number, extra: Partial<GroupChange> = {}, members = ["a"], pending: string[] = []): GroupChange {
  const events = Array.from({ length: count }, (_, index) => event(groupId, from + index));
  return { group: group(groupId, from + count - 1, members, pending), events, atMs: 1_000 + from, ...extra };
}

const task = (groupTaskId: string, state: GroupTaskState, createdAtMs: number) =>
  create(GroupTaskSchema, { groupTaskId, groupId: "g1", state, createdAt: timestampFromMs(createdAtMs), taskType: "text_analysis" });
const vote = (voteId: string, state: VoteState, deadlineMs: number) =>
  create(VoteSchema, { voteId, groupId: "g1", state, deadline: timestampFromMs(deadlineMs), createdAt: timestampFromMs(1_000), options: ["yes", "no"] });

const bytes = (e: StoredGroupEvent) => Buffer.from(toBinary(EnvelopeSchema, e.envelope));
const conflict = (reason: string) => expect.objectContaining({ name: "StoreConflictError", reason });

export interface GroupContractContext {
  storage(): Storage;
  /** Closes the storage and opens it again (durable stores only). */
  reopen?(): Promise<Storage>;
}

export function groupContractCases(ctx: GroupContractContext): void {
  it("groups: commits only at the expected version, continuing the log without gaps", async () => {
    const groups = ctx.storage().groups;
    const created = await groups.createGroup(change("g1", 1, 2));
    expect(created).toMatchObject({ groupId: "g1", version: 1, lastSequence: 2 });
    await expect(groups.createGroup(change("g1", 1, 1))).rejects.toEqual(conflict("group_exists"));
    await expect(groups.createGroup(change("g2", 2, 1))).rejects.toEqual(conflict("sequence"));
    const next = await groups.commitGroup("g1", 1, change("g1", 3, 1));
    expect(next).toMatchObject({ version: 2, lastSequence: 3 });
    await expect(groups.commitGroup("g1", 1, change("g1", 4, 1))).rejects.toEqual(conflict("version"));
    await expect(groups.commitGroup("g1", 2, change("g1", 5, 1))).rejects.toEqual(conflict("sequence"));
    await expect(groups.commitGroup("nope", 1, change("nope", 1, 1))).rejects.toEqual(conflict("missing"));
    expect(await groups.getGroup("g1")).toMatchObject({ version: 2, lastSequence: 3 });
    const log = await groups.listGroupEvents("g1", 2);
    expect(log.map((e) => e.sequence)).toEqual([2, 3]);
    expect(log[0]!.payload).toMatchObject({ kind: GroupEventKind.MEMBER_INVITED, reason: "event 2" });
    expect((await groups.listGroupEvents("g1", 1, 1)).map((e) => e.sequence)).toEqual([1]);
    expect(await groups.listGroupEvents("g1", 9)).toEqual([]);
  });

  it("groups: stores the exact signed bytes of every event", async () => {
    const groups = ctx.storage().groups;
    const first = change("g1", 1, 3);
    await groups.createGroup(first);
    const read = await groups.listGroupEvents("g1", 1);
    read.forEach((stored, index) => expect(bytes(stored).equals(bytes(first.events[index]!))).toBe(true));
  });

  it("groups: remembers the causing message in the commit, or not at all", async () => {
    const storage = ctx.storage();
    const reply = signedReply("a1");
    const message = { scope: "a2n" as const, messageId: "a1", senderAgentId: "a", digest: "d1", keepUntilMs: 10_000, reply };
    await storage.groups.createGroup(change("g1", 1, 1, { message }));
    expect(await storage.tasks.getMessage("a2n", "a1")).toMatchObject({ digest: "d1" });
    expect(await storage.tasks.getMessage("p2p", "a1")).toBeUndefined();
    await expect(storage.groups.commitGroup("g1", 1, change("g1", 2, 1, { message }))).rejects.toEqual(conflict("message"));
    expect(await storage.groups.getGroup("g1")).toMatchObject({ version: 1, lastSequence: 1 });
    expect(await storage.groups.listGroupEvents("g1", 1)).toHaveLength(1);
    await expect(storage.groups.createGroup(change("g2", 1, 1, { message }))).rejects.toEqual(conflict("message"));
    expect(await storage.groups.getGroup("g2")).toBeUndefined();
  });

  it("groups: keeps group tasks and votes with the group, and finds the running and the open ones", async () => {
    const groups = ctx.storage().groups;
    await groups.createGroup(change("g1", 1, 1, { groupTasks: [task("t2", GroupTaskState.RUNNING, 2_000)], votes: [vote("v1", VoteState.OPEN, 9_000)] }));
    await groups.commitGroup(
      "g1",
      1,
      change("g1", 2, 1, {
        groupTasks: [task("t1", GroupTaskState.WAITING, 1_500), task("t3", GroupTaskState.COMPLETED, 3_000)],
        votes: [vote("v2", VoteState.OPEN, 5_000), vote("v3", VoteState.CLOSED, 1_000)],
      }),
    );
    expect(await groups.getGroupTask("g1", "t3")).toMatchObject({ state: GroupTaskState.COMPLETED, taskType: "text_analysis" });
    expect(await groups.getGroupTask("g2", "t3")).toBeUndefined();
    expect((await groups.listActiveGroupTasks(10)).map((t) => t.groupTaskId)).toEqual(["t1", "t2"]);
    expect((await groups.listOpenVotes(10)).map((v) => v.voteId)).toEqual(["v2", "v1"]);
    expect(await groups.listGroupItems("g1")).toEqual({ groupTaskIds: ["t1", "t2", "t3"], voteIds: ["v1", "v2", "v3"] });
    // A later commit replaces a record.
    await groups.commitGroup("g1", 2, change("g1", 3, 1, { groupTasks: [task("t2", GroupTaskState.FAILED, 2_000)], votes: [vote("v1", VoteState.CLOSED, 9_000)] }));
    expect((await groups.listActiveGroupTasks(10)).map((t) => t.groupTaskId)).toEqual(["t1"]);
    expect((await groups.listOpenVotes(10)).map((v) => v.voteId)).toEqual(["v2"]);
    expect(await groups.getVote("g1", "v1")).toMatchObject({ state: VoteState.CLOSED, options: ["yes", "no"] });
  });

  it("groups: lists the groups an agent is a party to, newest first, paged", async () => {
    const groups = ctx.storage().groups;
    for (let i = 0; i < 5; i++) await groups.createGroup({ ...change(`g${i}`, 1, 1, {}, ["a", `solo${i}`], i === 4 ? ["invitee"] : []), atMs: 1_000 + i });
    const seen: string[] = [];
    let token: string | undefined;
    do {
      const page = await groups.listGroupsOf("a", 2, token);
      seen.push(...page.groups.map((g) => g.groupId));
      token = page.nextPageToken || undefined;
    } while (token);
    expect(seen).toEqual(["g4", "g3", "g2", "g1", "g0"]);
    expect((await groups.listGroupsOf("solo2", 10)).groups.map((g) => g.groupId)).toEqual(["g2"]);
    expect((await groups.listGroupsOf("invitee", 10)).groups.map((g) => g.groupId)).toEqual(["g4"]);
    // Membership follows the latest commit.
    await groups.commitGroup("g2", 1, change("g2", 2, 1, {}, ["a"]));
    expect((await groups.listGroupsOf("solo2", 10)).groups).toEqual([]);
    await expect(groups.listGroupsOf("a", 2, "bogus")).rejects.toBeInstanceOf(RangeError);
  });

  it("groups: prunes dissolved groups past retention with everything of theirs", async () => {
    const groups = ctx.storage().groups;
    await groups.createGroup(change("old", 1, 1, { groupTasks: [task("t", GroupTaskState.CANCELLED, 1)] }));
    await groups.commitGroup("old", 1, { group: group("old", 2, ["a"], [], GroupStatus.DISSOLVED), events: [event("old", 2)], atMs: 2_000 });
    await groups.createGroup(change("live", 1, 1));
    expect(await groups.pruneGroups(1_500, 10)).toBe(0);
    expect(await groups.pruneGroups(3_000, 10)).toBe(1);
    expect(await groups.getGroup("old")).toBeUndefined();
    expect(await groups.listGroupEvents("old", 1)).toEqual([]);
    expect(await groups.getGroupTask("old", "t")).toBeUndefined();
    expect((await groups.listGroupsOf("a", 10)).groups.map((g) => g.groupId)).toEqual(["live"]);
  });

  it("groups: announces every commit with its events", async () => {
    const groups = ctx.storage().groups;
    const heard: GroupChangeNotice[] = [];
    const stop = groups.onGroupChange((notice) => heard.push(notice));
    await groups.createGroup(change("g1", 1, 2));
    await groups.commitGroup("g1", 1, change("g1", 3, 1));
    stop();
    await groups.commitGroup("g1", 2, change("g1", 4, 1));
    expect(heard.map((n) => [n.groupId, n.lastSequence, n.events?.length])).toEqual([
      ["g1", 2, 2],
      ["g1", 3, 1],
    ]);
  });

  if (ctx.reopen !== undefined) {
    it("groups: keep everything across a close and reopen", async () => {
      const first = change("g1", 1, 2, { groupTasks: [task("t1", GroupTaskState.RUNNING, 1)], votes: [vote("v1", VoteState.OPEN, 9)] });
      await ctx.storage().groups.createGroup(first);
      const storage = await ctx.reopen!();
      expect(await storage.groups.getGroup("g1")).toMatchObject({ version: 1, lastSequence: 2, group: { name: "group g1" } });
      const log = await storage.groups.listGroupEvents("g1", 1);
      log.forEach((stored, index) => expect(bytes(stored).equals(bytes(first.events[index]!))).toBe(true));
      expect((await storage.groups.listActiveGroupTasks(5)).map((t) => t.groupTaskId)).toEqual(["t1"]);
      expect((await storage.groups.listOpenVotes(5)).map((v) => v.voteId)).toEqual(["v1"]);
    });
  }
}
