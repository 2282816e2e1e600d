// A group host (GroupManager): takes verified a2n:* messages, refuses a
// replayed one (the same envelope again gets its first reply), checks the
// sender's role, and records every change in the group's log through one
// commit with the message that caused it. Group tasks run through the
// fan-out runner, vote deadlines through the vote clock.
import { MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import {
  VoteCloseReason,
  type GroupCreatePayload,
  type GroupTaskAnswerPayload,
  type GroupTaskCancelPayload,
  type MemberJoinPayload,
  type VoteCastPayload,
  type VoteClosePayload,
  type VoteStartPayload,
} from "../../gen/synapse/v1/a2n_pb.js";
import { VoteState, type Group, type GroupTask, type Vote } from "../../gen/synapse/v1/group_pb.js";
import { isRedelivery, MessageGate, replayed } from "../agent/message-gate.js";
import type { OpenedEnvelope } from "../envelope/open.js";
import { protocolError } from "../protocol/errors.js";
import type { GroupRecord, GroupStorage } from "../store/group-storage.js";
import { StoreConflictError, type MessageStore, type SeenMessage, type StoredReply } from "../store/store.js";
import type { GroupTaskRunner } from "./fanout.js";
import type { GroupCause, GroupLog, Mutation } from "./log.js";
import type { MemberConnector } from "./members.js";
import * as membership from "./membership.js";
import { alreadyExists, LIMITS, notFound, requireActive, requireCoordinator } from "./rules.js";
import { cancelTask, checkAnswer, checkTaskId, isOver, recordAnswer, submitTask, type TaskChange } from "./tasks.js";
import type { VoteClock } from "./vote-clock.js";
import { castBallot, closeBy, closeVote, startVote, type VoteChange } from "./votes.js";

export interface GroupOutcome {
  /** The first event the message caused (the same again for a re-delivery). */
  reply: StoredReply;
  group?: Group;
  groupTask?: GroupTask;
  vote?: Vote;
}

export interface GroupHostParts {
  storage: GroupStorage;
  messages: MessageStore;
  log: GroupLog;
  members: MemberConnector;
  runner: GroupTaskRunner;
  clock: VoteClock;
  clockSkewMs: number;
  now: () => number;
}

interface Subject {
  groupTask?: GroupTask;
  vote?: Vote;
}

const groupIdOf = (opened: OpenedEnvelope) => (opened.payload as { groupId?: string }).groupId ?? "";

export class GroupHandler {
  private readonly gate: MessageGate<GroupOutcome>;

  constructor(private readonly parts: GroupHostParts) {
    this.gate = new MessageGate({ scope: "a2n", messages: parts.messages, clockSkewMs: parts.clockSkewMs, now: parts.now });
  }

  async receive(opened: OpenedEnvelope): Promise<GroupOutcome> {
    const { header, info } = opened;
    if (!info.wireName.startsWith("a2n:") || header.messageType === MessageType.A2N_GROUP_EVENT) {
      throw protocolError(ErrorCode.MESSAGE_FORMAT_INVALID, `GroupService.Send takes a2n:* messages a member sends, not ${info.wireName}`);
    }
    return this.gate.take(
      opened,
      (cause) => this.dispatch(opened, cause),
      (seen) => this.redelivered(opened, seen),
    );
  }

  private async redelivered(opened: OpenedEnvelope, seen: SeenMessage): Promise<GroupOutcome> {
    if (!isRedelivery(opened, seen) || seen.reply === undefined) throw replayed(opened.header.messageId);
    const groupId = groupIdOf(opened);
    const { storage } = this.parts;
    const payload = opened.payload as { voteId?: string };
    return {
      reply: seen.reply,
      group: (await storage.getGroup(groupId))?.group,
      groupTask: opened.header.taskId ? await storage.getGroupTask(groupId, opened.header.taskId) : undefined,
      vote: payload.voteId ? await storage.getVote(groupId, payload.voteId) : undefined,
    };
  }

  private async dispatch(opened: OpenedEnvelope, cause: GroupCause): Promise<GroupOutcome> {
    const groupId = groupIdOf(opened);
    const { log, members, now } = this.parts;
    switch (opened.header.messageType) {
      case MessageType.A2N_GROUP_CREATE: {
        const endpoint = (opened.payload as GroupCreatePayload).endpointUrl;
        const created = membership.createGroup(opened, log.host, now());
        if (endpoint !== "") await members.confirm(endpoint, opened.header.sender!.agentId, opened.header.sender!.keyId);
        try {
          const committed = await log.create({ ...created, result: {} }, cause);
          return { reply: committed.events[0]!, group: committed.record.group };
        } catch (error) {
          if (error instanceof StoreConflictError && error.reason === "group_exists") throw alreadyExists("group", groupId);
          throw error;
        }
      }
      case MessageType.A2N_MEMBER_JOIN: {
        const payload = opened.payload as MemberJoinPayload;
        const current = await this.requireGroup(groupId);
        requireActive(current.group);
        if (payload.endpointUrl !== "") await members.confirm(payload.endpointUrl, opened.header.sender!.agentId, opened.header.sender!.keyId);
        return this.change(groupId, cause, (group) => ({ ...membership.join(group, opened, now()), result: {} }));
      }
      case MessageType.A2N_MEMBER_INVITE:
        return this.change(groupId, cause, (group) => ({ ...membership.invite(group, opened), result: {} }));
      case MessageType.A2N_MEMBER_APPROVE:
        return this.change(groupId, cause, (group) => ({ ...membership.approve(group, opened, now()), result: {} }));
      case MessageType.A2N_MEMBER_ROLE:
        return this.change(groupId, cause, (group) => ({ ...membership.setRole(group, opened), result: {} }));
      case MessageType.A2N_MEMBER_LEAVE:
        return this.change(groupId, cause, (group) => ({ ...membership.leave(group, opened), result: {} }));
      case MessageType.A2N_MEMBER_REMOVE:
        return this.change(groupId, cause, (group) => ({ ...membership.remove(group, opened), result: {} }));
      case MessageType.A2N_GROUP_DISSOLVE:
        return this.dissolve(groupId, opened, cause);
      case MessageType.A2N_GROUP_TASK_SUBMIT:
        return this.taskChange(groupId, cause, async (group) => {
          const existing = await this.parts.storage.getGroupTask(groupId, opened.header.taskId);
          return submitTask(group, opened, existing, await this.openCount(groupId, "tasks"), now());
        });
      case MessageType.A2N_GROUP_TASK_CANCEL:
        return this.taskChange(groupId, cause, async (group) => {
          requireActive(group);
          requireCoordinator(group, opened.header.sender!.agentId, "cancel group tasks");
          const payload = opened.payload as GroupTaskCancelPayload;
          checkTaskId(opened.header, payload.groupTaskId);
          const task = await this.requireTask(groupId, payload.groupTaskId);
          return cancelTask(task, payload.reason, opened, now());
        });
      case MessageType.A2N_GROUP_TASK_ANSWER:
        return this.answer(groupId, opened, cause);
      case MessageType.A2N_VOTE_START:
        return this.voteChange(groupId, cause, async (group) => {
          const voteId = (opened.payload as VoteStartPayload | VoteCastPayload | VoteClosePayload).voteId;
          return startVote(group, opened, await this.parts.storage.getVote(groupId, voteId), await this.openCount(groupId, "votes"), now());
        });
      case MessageType.A2N_VOTE_CAST:
        return this.voteChange(groupId, cause, async (group) => castBallot(group, await this.parts.storage.getVote(groupId, (opened.payload as VoteStartPayload | VoteCastPayload | VoteClosePayload).voteId), opened, now()));
      case MessageType.A2N_VOTE_CLOSE: {
        const voteId = (opened.payload as VoteStartPayload | VoteCastPayload | VoteClosePayload).voteId;
        return this.voteChange(groupId, cause, async (group) => closeVote(group, await this.parts.storage.getVote(groupId, voteId), opened, voteId, now()));
      }
      default:
        throw protocolError(ErrorCode.MESSAGE_FORMAT_INVALID, `${opened.info.wireName} is not a message GroupService.Send takes`);
    }
  }

  private async requireGroup(groupId: string): Promise<GroupRecord> {
    const record = await this.parts.storage.getGroup(groupId);
    if (record === undefined) throw notFound("group", groupId);
    return record;
  }

  private async requireTask(groupId: string, groupTaskId: string): Promise<GroupTask> {
    const task = await this.parts.storage.getGroupTask(groupId, groupTaskId);
    if (task === undefined) throw notFound("group task", groupTaskId, groupId);
    return task;
  }

  /** How many group tasks run, or votes are open, in a group (counted only when there could be too many). */
  private async openCount(groupId: string, what: "tasks" | "votes"): Promise<number> {
    const { storage } = this.parts;
    const items = await storage.listGroupItems(groupId);
    const ids = what === "tasks" ? items.groupTaskIds : items.voteIds;
    if (ids.length < LIMITS.open) return ids.length;
    let open = 0;
    for (const id of ids) {
      if (what === "tasks") {
        const task = await storage.getGroupTask(groupId, id);
        if (task !== undefined && !isOver(task)) open++;
      } else if ((await storage.getVote(groupId, id))?.state === VoteState.OPEN) open++;
    }
    return open;
  }

  private async change<T extends Subject>(groupId: string, cause: GroupCause, work: (group: Group, record: GroupRecord) => Mutation<T> | Promise<Mutation<T>>): Promise<GroupOutcome> {
    const committed = await this.parts.log.update(groupId, (record) => work(record.group, record), cause);
    if (committed === undefined) throw notFound("group", groupId);
    return { reply: committed.events[0]!, group: committed.record.group, groupTask: committed.result.groupTask, vote: committed.result.vote };
  }

  private async taskChange(groupId: string, cause: GroupCause, work: (group: Group) => Promise<TaskChange>): Promise<GroupOutcome> {
    let change: TaskChange | undefined;
    const outcome = await this.change(groupId, cause, async (group) => {
      change = await work(group);
      return { group, events: change.events, groupTasks: [change.task], result: { groupTask: change.task } };
    });
    if (change !== undefined) this.parts.runner.dispatch(groupId, change);
    return outcome;
  }

  private async voteChange(groupId: string, cause: GroupCause, work: (group: Group) => Promise<VoteChange>): Promise<GroupOutcome> {
    const outcome = await this.change(groupId, cause, async (group) => {
      const change = await work(group);
      return { group, events: change.events, votes: [change.vote], result: { vote: change.vote } };
    });
    const vote = outcome.vote!;
    if (vote.state === VoteState.OPEN) this.parts.clock.schedule(vote);
    else this.parts.clock.forget(groupId, vote.voteId);
    return outcome;
  }

  /** Dissolving cancels the running group tasks and closes the open votes, in the same commit. */
  private async dissolve(groupId: string, opened: OpenedEnvelope, cause: GroupCause): Promise<GroupOutcome> {
    const { storage, now } = this.parts;
    const changes: TaskChange[] = [];
    const outcome = await this.change(groupId, cause, async (group) => {
      changes.length = 0;
      const dissolved = membership.dissolve(group, opened);
      const items = await storage.listGroupItems(groupId);
      const groupTasks: GroupTask[] = [];
      const votes: Vote[] = [];
      for (const id of items.groupTaskIds) {
        const task = await storage.getGroupTask(groupId, id);
        if (task === undefined || isOver(task)) continue;
        const change = cancelTask(task, "the group was dissolved", opened, now());
        changes.push(change);
        groupTasks.push(change.task);
        dissolved.events.push(...change.events);
      }
      for (const id of items.voteIds) {
        const vote = await storage.getVote(groupId, id);
        if (vote?.state !== VoteState.OPEN) continue;
        const change = closeBy(vote, VoteCloseReason.DISSOLVED, now(), opened);
        votes.push(change.vote);
        dissolved.events.push(...change.events);
      }
      return { ...dissolved, groupTasks, votes, result: {} };
    });
    for (const change of changes) this.parts.runner.dispatch(groupId, change);
    return outcome;
  }

  /** The answer goes to the member first (signed by the host); what the member accepted is recorded. */
  private async answer(groupId: string, opened: OpenedEnvelope, cause: GroupCause): Promise<GroupOutcome> {
    const record = await this.requireGroup(groupId);
    const payload = opened.payload as GroupTaskAnswerPayload;
    const subtask = checkAnswer(record.group, await this.parts.storage.getGroupTask(groupId, payload.groupTaskId), opened);
    await this.parts.runner.forward(groupId, subtask, payload, opened.header.sender!.agentId);
    return this.taskChange(groupId, cause, async () => recordAnswer(await this.requireTask(groupId, payload.groupTaskId), opened, this.parts.now()));
  }

  /** Closes a vote whose deadline passed (the vote clock calls this). */
  async closeAtDeadline(groupId: string, voteId: string): Promise<void> {
    await this.parts.log.update(groupId, async (record) => {
      const vote = await this.parts.storage.getVote(groupId, voteId);
      if (vote?.state !== VoteState.OPEN) return { group: record.group, events: [], result: undefined };
      const change = closeBy(vote, VoteCloseReason.DEADLINE, this.parts.now());
      return { group: record.group, events: change.events, votes: [change.vote], result: undefined };
    });
  }
}

