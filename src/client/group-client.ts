// The member side of the group protocol (A2N): a typed client that seals
// a2n:* messages to a group's host, verifies every event the host signs
// (signature, addressed to the group, gapless sequence), resumes WatchGroup
// after a disconnect, and reads groups, group tasks and votes.
import { create, type Message } from "@bufbuild/protobuf";
import { durationFromMs, timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Client, type Transport } from "@connectrpc/connect";
import { randomUUID } from "node:crypto";
import {
  GroupCreatePayloadSchema,
  GroupDissolvePayloadSchema,
  GroupRole,
  GroupTaskAnswerPayloadSchema,
  GroupTaskCancelPayloadSchema,
  GroupTaskSubmitPayloadSchema,
  MemberApprovePayloadSchema,
  MemberInvitePayloadSchema,
  MemberJoinPayloadSchema,
  MemberLeavePayloadSchema,
  MemberRemovePayloadSchema,
  MemberRolePayloadSchema,
  VoteCastPayloadSchema,
  VoteClosePayloadSchema,
  VoteStartPayloadSchema,
  type GroupEventPayload,
} from "../../gen/synapse/v1/a2n_pb.js";
import { CapabilitiesService } from "../../gen/synapse/v1/capabilities_pb.js";
import { MessageType, type Envelope } from "../../gen/synapse/v1/envelope_pb.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import { GroupService, type GroupTask, type TallyResponse, type Vote } from "../../gen/synapse/v1/group_pb.js";
import { keyIdOf } from "../crypto/keys.js";
import { issueToken } from "../crypto/tokens.js";
import { open } from "../envelope/open.js";
import { seal } from "../envelope/seal.js";
import type { TrustPolicy } from "../envelope/trust.js";
import { PinnedKeys } from "../envelope/trust-sources.js";
import { protocolError } from "../protocol/errors.js";
import { uuidV7 } from "../protocol/ids.js";
import { freshTraceparent, traceFieldsOf } from "../observability/trace-context.js";
import type { BallotInput, GroupClientOptions, GroupSendResult, GroupTaskInput, GroupWatchItem, SubtaskAnswer, VerifiedGroupEvent, VoteInput } from "./group-types.js";
import { createTransport } from "./transport.js";

export type { BallotInput, GroupClientOptions, GroupSendResult, GroupTaskInput, GroupWatchItem, SubtaskAnswer, VerifiedGroupEvent, VoteInput } from "./group-types.js";

const RESUMABLE = new Set([Code.Unavailable, Code.Internal, Code.Unknown, Code.Aborted, Code.DeadlineExceeded]);

/**
 * A member's or coordinator's client for a group host (GroupService, the
 * A2N messages of docs/PROTOCOL.md §7): every message is sealed with this
 * agent's key (its signature is its consent), every event of the group's
 * log is verified against the host's key and checked for gaps, and watches
 * resume after a dropped connection. Methods that send return the host's
 * signed reply and the group, group task or vote after it.
 *
 * @example
 * ```ts
 * const coordinator = await GroupClient.connect({ baseUrl: hostUrl, identity });
 * await coordinator.create("team", { name: "Reviewers" });
 * await coordinator.invite("team", { agentId: other.agentId, keyId: other.key.keyId });
 * // ... the invitee accepts with its own GroupClient: join("team", { invitationId, endpointUrl }) ...
 * const { groupTask } = await coordinator.submitTask("team", { taskType: "review", payload: { doc }, strategy: GroupTaskStrategy.BROADCAST }, 30_000);
 * ```
 */
export class GroupClient {
  private readonly groups: Client<typeof GroupService>;
  private cachedToken: { token: string; renewAtMs: number } | undefined;

  private constructor(
    private readonly options: GroupClientOptions,
    /** The host: its agent id, system id, and the key its events are checked against. */
    readonly host: { agentId: string; systemId: string; keyId: string; publicKey: Uint8Array },
    transport: Transport,
  ) {
    this.groups = createClient(GroupService, transport);
  }

  /** Learns the host's identity (GetCapabilities) and checks its key against the trust policy. */
  static async connect(options: GroupClientOptions): Promise<GroupClient> {
    const transport = options.rpcTransport ?? createTransport(options.baseUrl, options.transport);
    const capabilities = (await createClient(CapabilitiesService, transport).getCapabilities({})).capabilities;
    if (capabilities === undefined || capabilities.publicKey.byteLength !== 32 || keyIdOf(capabilities.publicKey) !== capabilities.keyId) {
      throw protocolError(ErrorCode.SIGNATURE_INVALID, `${options.baseUrl} did not declare a usable agent identity`);
    }
    const trust = options.trust ?? PinnedKeys.inMemory({ firstUse: "any" });
    const verdict = await trust.check(capabilities.agentId, capabilities.keyId, capabilities.publicKey);
    if (verdict.kind !== "trusted" && verdict.kind !== "unknown") {
      throw protocolError(ErrorCode.UNKNOWN_SENDER, `agent ${capabilities.agentId} now declares key ${capabilities.keyId}, but ${verdict.expectedKeyId} is trusted for it`);
    }
    await trust.accepted?.(capabilities.agentId, capabilities.keyId, capabilities.publicKey);
    const host = { agentId: capabilities.agentId, systemId: capabilities.systemId, keyId: capabilities.keyId, publicKey: capabilities.publicKey };
    return new GroupClient(options, host, transport);
  }

  /** This agent's id. */
  get agentId(): string {
    return this.options.identity.agentId;
  }

  /** Seals an a2n:* message to the host, in the active span's trace or a new one. */
  envelope(type: MessageType, payload: Message, taskId?: string): Envelope {
    const me = { agentId: this.options.identity.agentId, systemId: this.options.identity.systemId };
    const active = traceFieldsOf();
    const trace = active.traceparent ? active : { traceparent: freshTraceparent() };
    return seal({ messageType: type, payload, sender: me, receiver: this.host, taskId, ...trace }, this.options.identity.key).envelope;
  }

  /** Verifies an event of `groupId`'s log: signed by the host, addressed to the group, an a2n:group_event. */
  async verifyEvent(groupId: string, envelope: Envelope): Promise<VerifiedGroupEvent> {
    const host = this.host;
    const trust: TrustPolicy = {
      publicKeyFor: (keyId) => (keyId === host.keyId ? host.publicKey : undefined),
      check: (agentId, keyId) => (agentId === host.agentId && keyId === host.keyId ? { kind: "trusted" } : { kind: "unknown" }),
    };
    const opened = await open(envelope, { trust, self: groupId, checkTime: false });
    if (opened.header.messageType !== MessageType.A2N_GROUP_EVENT) throw protocolError(ErrorCode.MESSAGE_FORMAT_INVALID, `expected a2n:group_event, got ${opened.info.wireName}`);
    return { envelope, header: opened.header, sequence: Number(opened.header.sequence), payload: opened.payload as GroupEventPayload };
  }

  /** Sends one sealed a2n:* envelope about `groupId` and verifies the host's reply. */
  async send(envelope: Envelope, groupId: string, waitMs?: number): Promise<GroupSendResult> {
    const response = await this.groups.send({ envelope, wait: waitMs === undefined ? undefined : durationFromMs(waitMs) });
    if (response.reply?.envelope === undefined) throw protocolError(ErrorCode.MESSAGE_FORMAT_INVALID, "the host sent no reply");
    return { reply: await this.verifyEvent(groupId, response.reply.envelope), group: response.group, groupTask: response.groupTask, vote: response.vote };
  }

  /** Creates a group at the host, with this agent as its first coordinator. */
  create(groupId: string, input: { name?: string; description?: string; endpointUrl?: string; weight?: number } = {}) {
    const payload = create(GroupCreatePayloadSchema, { groupId, name: input.name ?? "", description: input.description ?? "", endpointUrl: input.endpointUrl ?? "", weight: input.weight ?? 0 });
    return this.send(this.envelope(MessageType.A2N_GROUP_CREATE, payload), groupId);
  }

  /** Invites an agent (or offers a member a new role or weight); it joins only by accepting with its own key. Coordinators only. */
  invite(groupId: string, invitee: { agentId: string; keyId: string }, input: { role?: GroupRole; weight?: number; expiresAt?: Date; note?: string } = {}) {
    const payload = create(MemberInvitePayloadSchema, {
      groupId,
      invitee,
      role: input.role ?? GroupRole.MEMBER,
      weight: input.weight ?? 0,
      expiresAt: input.expiresAt ? timestampFromMs(input.expiresAt.getTime()) : undefined,
      note: input.note ?? "",
    });
    return this.send(this.envelope(MessageType.A2N_MEMBER_INVITE, payload), groupId);
  }

  /** Accepts an invitation (`invitationId`, the invite's message id), asks to join without one, or changes this member's endpoint. */
  join(groupId: string, input: { endpointUrl?: string; invitationId?: string; role?: GroupRole; note?: string } = {}) {
    const payload = create(MemberJoinPayloadSchema, { groupId, endpointUrl: input.endpointUrl ?? "", invitationId: input.invitationId ?? "", role: input.role ?? GroupRole.UNSPECIFIED, note: input.note ?? "" });
    return this.send(this.envelope(MessageType.A2N_MEMBER_JOIN, payload), groupId);
  }

  /**
   * Admits a pending join request (`requestId`, the join's message id) with
   * the role this approval grants (default member, whatever the request
   * asked for). Coordinators only.
   */
  approve(groupId: string, requestId: string, weight = 0, role: GroupRole = GroupRole.MEMBER) {
    return this.send(this.envelope(MessageType.A2N_MEMBER_APPROVE, create(MemberApprovePayloadSchema, { groupId, requestId, weight, role })), groupId);
  }

  /** Gives a member another role (and, when `weight` is set, another weight). Coordinators only; the last coordinator keeps its role. */
  setRole(groupId: string, agentId: string, role: GroupRole, input: { weight?: number; reason?: string } = {}) {
    const payload = create(MemberRolePayloadSchema, { groupId, agentId, role, weight: input.weight ?? 0, reason: input.reason ?? "" });
    return this.send(this.envelope(MessageType.A2N_MEMBER_ROLE, payload), groupId);
  }

  /** Leaves the group. */
  leave(groupId: string, reason = "") {
    return this.send(this.envelope(MessageType.A2N_MEMBER_LEAVE, create(MemberLeavePayloadSchema, { groupId, reason })), groupId);
  }

  /** Removes a member, or withdraws an agent's pending invitation or request. Coordinators only. */
  remove(groupId: string, agentId: string, reason = "") {
    return this.send(this.envelope(MessageType.A2N_MEMBER_REMOVE, create(MemberRemovePayloadSchema, { groupId, agentId, reason })), groupId);
  }

  /** Ends the group: running group tasks are cancelled, open votes closed. Coordinators only. */
  dissolve(groupId: string, reason = "") {
    return this.send(this.envelope(MessageType.A2N_GROUP_DISSOLVE, create(GroupDissolvePayloadSchema, { groupId, reason })), groupId);
  }

  /** Submits a group task, run as P2P tasks at the members; `waitMs` holds the reply until it ends or waits for an answer. Coordinators only. */
  submitTask(groupId: string, input: GroupTaskInput, waitMs?: number) {
    const groupTaskId = input.groupTaskId ?? uuidV7();
    const payload = create(GroupTaskSubmitPayloadSchema, {
      groupId,
      groupTaskId,
      taskType: input.taskType,
      payload: input.payload ?? {},
      strategy: input.strategy,
      shards: input.shards ?? [],
      quorum: input.quorum ?? 0,
      members: input.members ?? [],
      memberTimeout: input.memberTimeoutMs === undefined ? undefined : durationFromMs(input.memberTimeoutMs),
      maxAttempts: input.maxAttempts ?? 0,
      confidential: input.confidential ?? false,
    });
    return this.send(this.envelope(MessageType.A2N_GROUP_TASK_SUBMIT, payload, groupTaskId), groupId, waitMs);
  }

  /** Answers a sub-task's question (need-info fields or a need-human decision); the host forwards it to the member. Coordinators only. */
  answer(groupId: string, groupTaskId: string, subtaskId: string, answer: SubtaskAnswer, note = "", waitMs?: number) {
    const payload = create(GroupTaskAnswerPayloadSchema, {
      groupId,
      groupTaskId,
      subtaskId,
      answer: "info" in answer ? { case: "info", value: answer.info } : { case: "decision", value: { ...answer.decision, rejectionReason: answer.decision.rejectionReason ?? "" } },
      note,
    });
    return this.send(this.envelope(MessageType.A2N_GROUP_TASK_ANSWER, payload, groupTaskId), groupId, waitMs);
  }

  /** Cancels a group task and its running sub-tasks. Coordinators only. */
  cancelTask(groupId: string, groupTaskId: string, reason = "") {
    return this.send(this.envelope(MessageType.A2N_GROUP_TASK_CANCEL, create(GroupTaskCancelPayloadSchema, { groupId, groupTaskId, reason }), groupTaskId), groupId);
  }

  /** Starts a vote. Coordinators and members. */
  startVote(groupId: string, input: VoteInput) {
    const payload = create(VoteStartPayloadSchema, {
      groupId,
      voteId: input.voteId ?? randomUUID(),
      question: input.question,
      options: input.options,
      rule: input.rule,
      threshold: input.threshold,
      quorum: input.quorum ?? 0,
      eligibleVoters: input.eligibleVoters ?? [],
      deadline: timestampFromMs(input.deadline.getTime()),
    });
    return this.send(this.envelope(MessageType.A2N_VOTE_START, payload), groupId);
  }

  /** Casts this agent's ballot (one per voter, signed by it). */
  cast(groupId: string, voteId: string, ballot: BallotInput) {
    const payload = create(VoteCastPayloadSchema, {
      groupId,
      voteId,
      choice: "choice" in ballot ? ballot.choice : "",
      ranking: "ranking" in ballot ? ballot.ranking : [],
      abstain: "abstain" in ballot,
    });
    return this.send(this.envelope(MessageType.A2N_VOTE_CAST, payload), groupId);
  }

  /** Closes a vote before its deadline, counting the ballots cast. Coordinators, or the member who started it. */
  closeVote(groupId: string, voteId: string, reason = "") {
    return this.send(this.envelope(MessageType.A2N_VOTE_CLOSE, create(VoteClosePayloadSchema, { groupId, voteId, reason })), groupId);
  }

  /** A bearer token for the reads. */
  token(lifetimeSeconds = 300): Promise<string> {
    return issueToken(this.options.identity.key, { agentId: this.options.identity.agentId, audience: this.host.agentId, lifetimeSeconds });
  }

  private async headers(): Promise<Record<string, string>> {
    if (this.cachedToken === undefined || Date.now() > this.cachedToken.renewAtMs) this.cachedToken = { token: await this.token(180), renewAtMs: Date.now() + 120_000 };
    return { Authorization: `Bearer ${this.cachedToken.token}` };
  }

  /** A group, with the ids of its group tasks and votes. */
  async getGroup(groupId: string) {
    return this.groups.getGroup({ groupId }, { headers: await this.headers() });
  }

  /** The groups this agent is a member of (or invited to) at the host, newest first, a page at a time. */
  async listGroups(pageSize = 0, pageToken = "") {
    return this.groups.listGroups({ pageSize, pageToken }, { headers: await this.headers() });
  }

  /** A group task and its sub-tasks. */
  async getGroupTask(groupId: string, groupTaskId: string): Promise<GroupTask> {
    return (await this.groups.getGroupTask({ groupId, groupTaskId }, { headers: await this.headers() })).groupTask!;
  }

  /** A vote with its signed ballots and its count (interim while open). */
  async getVote(groupId: string, voteId: string): Promise<Vote> {
    return (await this.groups.getVote({ groupId, voteId }, { headers: await this.headers() })).vote!;
  }

  /** A vote's count (interim while open) with what recomputes it: the signed vote_start and every signed ballot. */
  async tally(groupId: string, voteId: string): Promise<TallyResponse> {
    return this.groups.tally({ groupId, voteId }, { headers: await this.headers() });
  }

  /**
   * The group's log from `fromSequence`, every event verified and in order,
   * resumed from the next sequence after a dropped connection (nothing lost
   * or repeated). Ends when the host ends the stream (the group was
   * dissolved, or this agent left it) or the signal aborts.
   */
  async *watch(groupId: string, options: { fromSequence?: number; signal?: AbortSignal } = {}): AsyncGenerator<GroupWatchItem> {
    let next = Math.max(1, options.fromSequence ?? 1);
    let attempt = 0;
    let sawSnapshot = false;
    const maxRetries = this.options.maxRetries ?? 5;
    for (;;) {
      try {
        for await (const message of this.groups.watchGroup({ groupId, fromSequence: BigInt(next) }, { headers: await this.headers(), signal: options.signal })) {
          attempt = 0;
          if (message.kind.case === "snapshot") {
            if (!sawSnapshot) yield { kind: "snapshot", group: message.kind.value };
            sawSnapshot = true;
          } else if (message.kind.case === "heartbeat") {
            yield { kind: "heartbeat" };
          } else if (message.kind.case === "event") {
            const event = await this.verifyEvent(groupId, message.kind.value.message!.envelope!);
            if (event.sequence !== next || Number(message.kind.value.sequence) !== next) {
              throw protocolError(ErrorCode.MESSAGE_FORMAT_INVALID, `group event ${event.sequence} arrived where ${next} was due`);
            }
            next++;
            yield { kind: "event", event };
          }
        }
        return;
      } catch (error) {
        const connectError = ConnectError.from(error);
        if (options.signal?.aborted || !RESUMABLE.has(connectError.code) || attempt >= maxRetries) throw connectError;
        attempt++;
        yield { kind: "reconnecting", attempt, fromSequence: next, error: connectError };
        await new Promise((resolve) => setTimeout(resolve, (this.options.retryBaseDelayMs ?? 500) * 2 ** (attempt - 1)));
      }
    }
  }
}
