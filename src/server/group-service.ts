// GroupService over RPC: Send opens each a2n:* envelope (signature first,
// then sender, receiver, expiry) and hands it to the group host; the reads
// authenticate with bearer tokens, like P2PService's.
import { create } from "@bufbuild/protobuf";
import { durationMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import type { GroupTaskAnswerPayload } from "../../gen/synapse/v1/a2n_pb.js";
import { MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import {
  GetGroupResponseSchema,
  GetGroupTaskResponseSchema,
  GetVoteResponseSchema,
  GroupService,
  GroupServiceSendResponseSchema,
  ListGroupsResponseSchema,
  TallyResponseSchema,
  VoteState,
  WatchGroupResponseSchema,
} from "../../gen/synapse/v1/group_pb.js";
import type { Agent } from "../agent/agent.js";
import { signedMessage } from "../envelope/view.js";
import type { GroupHost } from "../group/group-host.js";
import type { StoredReply } from "../store/store.js";
import { linkedSignal } from "../abort.js";
import { authenticate } from "./auth.js";
import { openSent } from "./open-sent.js";
import { fittedPage, replyFormat } from "./reply-fit.js";
import { groupPageSize } from "../group/reader.js";

const signed = (stored: StoredReply) => signedMessage(stored.envelope, stored.header, stored.payload);

/** Send's longest wait for a group task. */
const MAX_WAIT_MS = 3600 * 1000;

export function groupService(host: GroupHost, agent: Agent, draining: AbortSignal, replyLimit: number): ServiceImpl<typeof GroupService> {
  const bearer = { audience: agent.identity.agentId, trust: agent.trust };
  return {
    async send(request, ctx) {
      const opened = await openSent(request.envelope, agent.openOptions, ctx);
      // The server's metrics count it.
      agent.observers.messageReceived(opened.header.messageType);
      const outcome = await host.receive(opened);
      let groupTask = outcome.groupTask;
      if (request.wait !== undefined && groupTask !== undefined) {
        const waitMs = Math.min(Math.max(0, durationMs(request.wait)), MAX_WAIT_MS);
        const answer = opened.info.type === MessageType.A2N_GROUP_TASK_ANSWER ? (opened.payload as GroupTaskAnswerPayload) : undefined;
        const asked = groupTask.subtasks.find((subtask) => subtask.ref?.subtaskId === answer?.subtaskId);
        const answered = asked === undefined ? undefined : { subtaskId: answer!.subtaskId, memberSequence: asked.memberSequence };
        const { signal, release } = linkedSignal(ctx.signal, draining);
        try {
          groupTask = (await host.waitForTask(groupTask.groupId, groupTask.groupTaskId, waitMs, signal, answered)) ?? groupTask;
        } finally {
          release();
        }
      }
      return create(GroupServiceSendResponseSchema, { reply: signed(outcome.reply), group: outcome.group, groupTask, vote: outcome.vote });
    },

    async getGroup(request, ctx) {
      const caller = await authenticate(bearer, ctx);
      return create(GetGroupResponseSchema, await host.reader.getGroup(request.groupId, caller.agentId));
    },

    async listGroups(request, ctx) {
      const caller = await authenticate(bearer, ctx);
      const read = async (size: number) => create(ListGroupsResponseSchema, await host.reader.listGroups(caller.agentId, size, request.pageToken));
      return fittedPage(ListGroupsResponseSchema, groupPageSize(request.pageSize), read, replyFormat(ctx), replyLimit);
    },

    async *watchGroup(request, ctx) {
      const caller = await authenticate(bearer, ctx);
      const { signal, release } = linkedSignal(ctx.signal, draining);
      let last = 0n;
      try {
        for await (const item of host.reader.watch(request.groupId, caller.agentId, Number(request.fromSequence), signal)) {
          if (item.kind === "snapshot") yield create(WatchGroupResponseSchema, { kind: { case: "snapshot", value: item.group } });
          else if (item.kind === "heartbeat") yield create(WatchGroupResponseSchema, { kind: { case: "heartbeat", value: signed(item.heartbeat) } });
          else {
            last = BigInt(item.event.sequence);
            yield create(WatchGroupResponseSchema, { kind: { case: "event", value: { sequence: last, message: signed(item.event) } } });
          }
        }
      } finally {
        release();
      }
      if (draining.aborted) throw new ConnectError(`the agent is shutting down; resume with from_sequence ${last + 1n}`, Code.Unavailable);
    },

    async getGroupTask(request, ctx) {
      const caller = await authenticate(bearer, ctx);
      return create(GetGroupTaskResponseSchema, { groupTask: await host.reader.getGroupTask(request.groupId, request.groupTaskId, caller.agentId) });
    },

    async getVote(request, ctx) {
      const caller = await authenticate(bearer, ctx);
      return create(GetVoteResponseSchema, { vote: await host.reader.getVote(request.groupId, request.voteId, caller.agentId) });
    },

    async tally(request, ctx) {
      const caller = await authenticate(bearer, ctx);
      const { vote, tally, summary } = await host.reader.tally(request.groupId, request.voteId, caller.agentId);
      return create(TallyResponseSchema, {
        tally,
        start: vote.start,
        eligible: vote.eligible,
        ballots: vote.ballots,
        summary,
        state: vote.state === VoteState.UNSPECIFIED ? VoteState.OPEN : vote.state,
      });
    },
  };
}
