// Groups (A2N) through real `synapse serve` processes: a host and three
// member agents. Membership needs the member's own signature (attempts to
// add an agent without it are refused), roles decide who may do what, and
// the group's signed log is streamed resumably by WatchGroup.
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GroupEventKind, GroupRole, MemberApprovePayloadSchema, MemberInvitePayloadSchema, MemberJoinPayloadSchema } from "../gen/synapse/v1/a2n_pb.js";
import { EnvelopeSchema, MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { GroupService, GroupStatus, PendingKind } from "../gen/synapse/v1/group_pb.js";
import type { AgentIdentity } from "../src/agent/identity.js";
import type { GroupClient, VerifiedGroupEvent } from "../src/client/group-client.js";
import { seal } from "../src/envelope/seal.js";
import { findErrorDetail } from "../src/protocol/errors.js";
import { startGroupAgents, stopAll, userClient, type GroupAgent } from "./helpers/group-agents.js";
import { replayGroupLog } from "./helpers/group-log-replay.js";
import { tempDir } from "./helpers/server.js";
import { CapabilitiesService, InterfaceCategory } from "../gen/synapse/v1/capabilities_pb.js";
import { createAgent } from "../src/agent/agent.js";
import { loadOrCreateIdentity } from "../src/agent/identity.js";
import { defaultAgentCapabilities } from "../src/capabilities/defaults.js";
import { PinnedKeys } from "../src/envelope/trust-sources.js";
import { createGroupHost } from "../src/group/group-host.js";
import { startServer } from "../src/server/server.js";
import { memoryStorage } from "../src/store/memory/index.js";

let agents: GroupAgent[];
let host: GroupAgent;
let a: GroupAgent;
let b: GroupAgent;
let c: GroupAgent;
let coordinator: GroupClient & { identity: AgentIdentity };

beforeAll(async () => {
  agents = await startGroupAgents(4);
  [host, a, b, c] = agents as [GroupAgent, GroupAgent, GroupAgent, GroupAgent];
  coordinator = await userClient(host.url);
}, 30_000);
afterAll(async () => stopAll(agents));

/** The field a refusal names (details.field). */
async function refusedField(call: Promise<unknown>): Promise<[Code, string | undefined, unknown]> {
  const error = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error, "the call should have been refused").toBeInstanceOf(ConnectError);
  const detail = findErrorDetail(error);
  return [(error as ConnectError).code, detail?.protocolCode, (detail?.details as { field?: unknown } | undefined)?.field];
}

/** The refusal of a call as [code, protocol code, rule]. */
async function refusal(call: Promise<unknown>): Promise<[Code, string | undefined, unknown]> {
  const error = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error, "the call should have been refused").toBeInstanceOf(ConnectError);
  const detail = findErrorDetail(error);
  return [(error as ConnectError).code, detail?.protocolCode, (detail?.details as { rule?: unknown } | undefined)?.rule];
}

const memberIds = async (groupId: string) => ((await coordinator.getGroup(groupId)).group?.members ?? []).map((m) => m.agent?.agentId);

describe("membership with consent", () => {
  it("admits by invitation and the invitee's own acceptance, or by a request the coordinator approves", async () => {
    const created = await coordinator.create("crew", { name: "crew" });
    expect(created.reply).toMatchObject({ sequence: 1, payload: { kind: GroupEventKind.GROUP_CREATED } });
    expect(created.group?.members.map((m) => [m.agent?.agentId, m.role])).toEqual([[coordinator.agentId, GroupRole.COORDINATOR]]);

    const invited = await coordinator.invite("crew", a.ref, { weight: 4 });
    expect(invited.group?.pending).toMatchObject([{ kind: PendingKind.INVITATION, agent: { agentId: a.ref.agentId } }]);
    expect(await memberIds("crew")).toEqual([coordinator.agentId]);
    // The invitee may read the group it is invited to; others may not know it exists.
    expect((await a.client.getGroup("crew")).group?.groupId).toBe("crew");
    expect(await refusal(b.client.getGroup("crew"))).toEqual([Code.NotFound, "invalid_params", "not_found"]);

    const joined = await a.client.join("crew", { invitationId: invited.reply.header.replyTo, endpointUrl: a.url });
    expect(joined.reply.payload).toMatchObject({ kind: GroupEventKind.MEMBER_ADDED, member: { role: GroupRole.MEMBER, weight: 4, endpointUrl: a.url } });
    expect(joined.reply.payload.member?.consentMessageId).toBe(joined.reply.header.replyTo);
    expect(joined.reply.payload.member?.admittedByMessageId).toBe(invited.reply.header.replyTo);

    const asked = await b.client.join("crew", { endpointUrl: b.url });
    expect(asked.reply.payload.kind).toBe(GroupEventKind.JOIN_REQUESTED);
    expect(await memberIds("crew")).toEqual([coordinator.agentId, a.ref.agentId]);
    const approved = await coordinator.approve("crew", asked.reply.header.replyTo);
    expect(approved.reply.payload).toMatchObject({ kind: GroupEventKind.MEMBER_ADDED, member: { agent: { agentId: b.ref.agentId }, consentMessageId: asked.reply.header.replyTo } });
    expect(await memberIds("crew")).toEqual([coordinator.agentId, a.ref.agentId, b.ref.agentId]);
  });

  it("never adds an agent without its own signature", async () => {
    const invitation = (await coordinator.invite("crew", c.ref)).reply.header.replyTo;
    // The coordinator accepts C's invitation itself: it is not addressed to the coordinator.
    expect(await refusal(coordinator.join("crew", { invitationId: invitation }))).toEqual([Code.InvalidArgument, "invalid_params", "no_invitation"]);
    // Nor to another member.
    expect(await refusal(a.client.join("crew", { invitationId: invitation }))).toEqual([Code.InvalidArgument, "invalid_params", "no_invitation"]);
    // The coordinator signs a join that claims to come from C: C's id is derived from C's key, so no other key speaks for it.
    const payload = create(MemberJoinPayloadSchema, { groupId: "crew", invitationId: invitation });
    const forged = seal({ messageType: MessageType.A2N_MEMBER_JOIN, payload, sender: { agentId: c.ref.agentId }, receiver: coordinator.host }, coordinator.identity.key).envelope;
    const raw = createClient(GroupService, createConnectTransport({ baseUrl: host.url, httpVersion: "1.1" }));
    expect((await refusal(raw.send({ envelope: forged })))[0]).toBe(Code.Unauthenticated);
    // An approval of a request nobody made admits nobody.
    expect(await refusal(coordinator.approve("crew", "no-such-request"))).toEqual([Code.InvalidArgument, "invalid_params", "no_join_request"]);
    // C joins with an endpoint where another agent answers: refused.
    expect(await refusal(c.client.join("crew", { invitationId: invitation, endpointUrl: a.url }))).toEqual([Code.PermissionDenied, "permission_denied", "endpoint_is_another_agent"]);
    expect(await memberIds("crew")).not.toContain(c.ref.agentId);
    // An invitation names the key that must accept; C signing with its own key does not fit one made out to another key.
    const wrongKey = (await coordinator.invite("crew", { agentId: c.ref.agentId, keyId: a.ref.keyId })).reply.header.replyTo;
    expect(await refusal(c.client.join("crew", { invitationId: wrongKey }))).toEqual([Code.PermissionDenied, "permission_denied", "invited_key"]);
    expect(await memberIds("crew")).not.toContain(c.ref.agentId);
    // With its own signature on the right invitation C joins (the newer invitation replaced the first).
    const fresh = (await coordinator.invite("crew", c.ref, { role: GroupRole.OBSERVER })).reply.header.replyTo;
    expect((await c.client.join("crew", { invitationId: fresh })).reply.payload.member?.role).toBe(GroupRole.OBSERVER);
  });

  it("lets each role do only its part", async () => {
    // Members do not manage membership; observers do not vote or start votes.
    expect(await refusal(a.client.invite("crew", c.ref))).toEqual([Code.PermissionDenied, "permission_denied", "coordinator_only"]);
    expect(await refusal(a.client.remove("crew", b.ref.agentId))).toEqual([Code.PermissionDenied, "permission_denied", "coordinator_only"]);
    const deadline = new Date(Date.now() + 60_000);
    expect(await refusal(c.client.startVote("crew", { question: "?", options: ["x", "y"], rule: 1, deadline }))).toEqual([Code.PermissionDenied, "permission_denied", "observer"]);
    // A member changes its own endpoint with its own join; the last coordinator cannot leave.
    expect((await b.client.join("crew", { endpointUrl: b.url.replace("127.0.0.1", "localhost") })).reply.payload.kind).toBe(GroupEventKind.MEMBER_UPDATED);
    expect(await refusal(coordinator.leave("crew"))).toEqual([Code.FailedPrecondition, "illegal_transition", "last_coordinator"]);
    // A member is made coordinator only when it accepts; then the first one may leave.
    const promotion = (await coordinator.invite("crew", a.ref, { role: GroupRole.COORDINATOR, weight: 4 })).reply.header.replyTo;
    expect((await a.client.join("crew", { invitationId: promotion })).reply.payload).toMatchObject({ kind: GroupEventKind.MEMBER_UPDATED, member: { role: GroupRole.COORDINATOR } });
    expect((await coordinator.leave("crew", "handing over")).reply.payload.kind).toBe(GroupEventKind.MEMBER_LEFT);
    expect(await refusal(coordinator.getGroup("crew"))).toEqual([Code.NotFound, "invalid_params", "not_found"]);
    // The new coordinator removes the observer and dissolves the group; nothing is accepted after that.
    expect((await a.client.remove("crew", c.ref.agentId, "done watching")).reply.payload.kind).toBe(GroupEventKind.MEMBER_REMOVED);
    const dissolved = await a.client.dissolve("crew", "finished");
    expect(dissolved.group?.status).toBe(GroupStatus.DISSOLVED);
    expect(await refusal(b.client.leave("crew"))).toEqual([Code.FailedPrecondition, "illegal_transition", "group_dissolved"]);
    // Still readable by its last members.
    expect((await b.client.getGroup("crew")).group?.status).toBe(GroupStatus.DISSOLVED);
  });

  it("answers a re-sent message with its first reply, and refuses another message reusing its id", async () => {
    await coordinator.create("echo");
    const envelope = coordinator.envelope(MessageType.A2N_MEMBER_INVITE, create(MemberInvitePayloadSchema, { groupId: "echo", invitee: a.ref }));
    const first = await coordinator.send(envelope, "echo");
    const again = await coordinator.send(envelope, "echo");
    expect(Buffer.from(toBinary(EnvelopeSchema, again.reply.envelope)).equals(Buffer.from(toBinary(EnvelopeSchema, first.reply.envelope)))).toBe(true);
    expect(again.group?.lastSequence).toBe(2n);
    const messageId = first.reply.header.replyTo;
    const other = seal(
      { messageType: MessageType.A2N_MEMBER_INVITE, payload: create(MemberInvitePayloadSchema, { groupId: "echo", invitee: b.ref }), sender: { agentId: coordinator.agentId }, receiver: coordinator.host, messageId },
      coordinator.identity.key,
    ).envelope;
    expect(await refusal(coordinator.send(other, "echo"))).toEqual([Code.AlreadyExists, "replay_detected", undefined]);
    expect((await coordinator.getGroup("echo")).group?.lastSequence).toBe(2n);
  });
});

describe("roles are granted, never chosen", () => {
  /** The group's log up to now, every event verified by the client. */
  async function logOf(groupId: string, reader: GroupClient = coordinator): Promise<VerifiedGroupEvent[]> {
    const events: VerifiedGroupEvent[] = [];
    let last = 0n;
    const abort = new AbortController();
    for await (const item of reader.watch(groupId, { signal: abort.signal })) {
      if (item.kind === "snapshot") last = item.group.lastSequence;
      if (item.kind === "event") events.push(item.event);
      if (events.length > 0 && BigInt(events.length) >= last) break;
    }
    abort.abort();
    return events;
  }

  it("admits a request that asks for coordinator as a member, who then cannot remove the creator", async () => {
    await coordinator.create("guild");
    const asked = await b.client.join("guild", { endpointUrl: b.url, role: GroupRole.COORDINATOR });
    // The wish is shown to the approver before it signs.
    expect(asked.reply.payload.member?.role).toBe(GroupRole.COORDINATOR);
    expect((await coordinator.getGroup("guild")).group?.pending).toMatchObject([{ kind: PendingKind.JOIN_REQUEST, role: GroupRole.COORDINATOR, agent: { agentId: b.ref.agentId } }]);
    const approved = await coordinator.approve("guild", asked.reply.header.replyTo);
    expect(approved.reply.payload).toMatchObject({ kind: GroupEventKind.MEMBER_ADDED, member: { agent: { agentId: b.ref.agentId }, role: GroupRole.MEMBER } });
    // The takeover: the newcomer removes the creator, or makes itself coordinator. Both refused.
    expect(await refusal(b.client.remove("guild", coordinator.agentId))).toEqual([Code.PermissionDenied, "permission_denied", "coordinator_only"]);
    expect(await refusal(b.client.setRole("guild", b.ref.agentId, GroupRole.COORDINATOR))).toEqual([Code.PermissionDenied, "permission_denied", "coordinator_only"]);
    // A coordinator does not remove itself either: it leaves (and the last one cannot).
    expect(await refusal(coordinator.remove("guild", coordinator.agentId))).toEqual([Code.FailedPrecondition, "illegal_transition", "remove_self"]);
    expect((await coordinator.getGroup("guild")).group?.members.map((m) => [m.agent?.agentId, m.role])).toEqual([
      [coordinator.agentId, GroupRole.COORDINATOR],
      [b.ref.agentId, GroupRole.MEMBER],
    ]);
  });

  it("reads an approval without a role (from an older sender) as member, and grants coordinator only when the approval names it", async () => {
    const asked = await c.client.join("guild", { role: GroupRole.COORDINATOR });
    // An approval as a sender that predates MemberApprovePayload.role encodes it: no role field at all.
    const legacy = create(MemberApprovePayloadSchema, { groupId: "guild", requestId: asked.reply.header.replyTo });
    expect(toBinary(MemberApprovePayloadSchema, legacy).byteLength).toBe(2 + "guild".length + 2 + asked.reply.header.replyTo.length);
    const admitted = await coordinator.send(coordinator.envelope(MessageType.A2N_MEMBER_APPROVE, legacy), "guild");
    expect(admitted.reply.payload.member?.role).toBe(GroupRole.MEMBER);
    await coordinator.remove("guild", c.ref.agentId);
    const again = await c.client.join("guild", { note: "as member, please" });
    const granted = await coordinator.approve("guild", again.reply.header.replyTo, 3, GroupRole.COORDINATOR);
    expect(granted.reply.payload.member).toMatchObject({ role: GroupRole.COORDINATOR, weight: 3 });
    expect(await refusedField(coordinator.approve("guild", "nothing", 0, 9 as GroupRole))).toEqual([Code.InvalidArgument, "invalid_params", "role"]);
  });

  it("changes a role as a coordinator's own signed act, keeps a coordinator, and the log proves every role", async () => {
    const promoted = await coordinator.setRole("guild", b.ref.agentId, GroupRole.COORDINATOR, { weight: 2, reason: "trusted now" });
    expect(promoted.reply.payload).toMatchObject({ kind: GroupEventKind.MEMBER_ROLE_CHANGED, member: { role: GroupRole.COORDINATOR, weight: 2, roleChangedByMessageId: promoted.reply.header.replyTo } });
    // B, now a coordinator, demotes C to observer; the weight stays when none is given.
    expect((await b.client.setRole("guild", c.ref.agentId, GroupRole.OBSERVER)).reply.payload.member).toMatchObject({ role: GroupRole.OBSERVER, weight: 3 });
    // An observer changes no roles; nor does anyone change the role of a non-member, to no role, or to the role it has.
    expect(await refusal(c.client.setRole("guild", c.ref.agentId, GroupRole.COORDINATOR))).toEqual([Code.PermissionDenied, "permission_denied", "coordinator_only"]);
    expect(await refusal(coordinator.setRole("guild", a.ref.agentId, GroupRole.MEMBER))).toEqual([Code.InvalidArgument, "invalid_params", "not_a_member"]);
    expect(await refusedField(coordinator.setRole("guild", c.ref.agentId, GroupRole.UNSPECIFIED))).toEqual([Code.InvalidArgument, "invalid_params", "role"]);
    expect(await refusal(coordinator.setRole("guild", c.ref.agentId, GroupRole.OBSERVER))).toEqual([Code.FailedPrecondition, "illegal_transition", "nothing_to_change"]);
    // A coordinator may step down while another remains; the last one may not.
    expect((await coordinator.setRole("guild", coordinator.agentId, GroupRole.MEMBER)).reply.payload.member?.role).toBe(GroupRole.MEMBER);
    expect(await refusal(b.client.setRole("guild", b.ref.agentId, GroupRole.MEMBER))).toEqual([Code.FailedPrecondition, "illegal_transition", "last_coordinator"]);
    expect(await refusal(coordinator.remove("guild", b.ref.agentId))).toEqual([Code.PermissionDenied, "permission_denied", "coordinator_only"]);

    const { group } = await b.client.getGroup("guild");
    const replayed = await replayGroupLog(await logOf("guild", b.client), host.ref.agentId, group);
    expect(replayed.story).toEqual([
      `GROUP_CREATED ${coordinator.agentId} COORDINATOR`,
      `JOIN_REQUESTED ${b.ref.agentId} COORDINATOR`,
      `MEMBER_ADDED ${b.ref.agentId} MEMBER`,
      `JOIN_REQUESTED ${c.ref.agentId} COORDINATOR`,
      `MEMBER_ADDED ${c.ref.agentId} MEMBER`,
      `MEMBER_REMOVED ${c.ref.agentId} MEMBER`,
      `JOIN_REQUESTED ${c.ref.agentId} MEMBER`,
      `MEMBER_ADDED ${c.ref.agentId} COORDINATOR`,
      `MEMBER_ROLE_CHANGED ${b.ref.agentId} COORDINATOR`,
      `MEMBER_ROLE_CHANGED ${c.ref.agentId} OBSERVER`,
      `MEMBER_ROLE_CHANGED ${coordinator.agentId} MEMBER`,
    ]);
  });
});

describe("WatchGroup", () => {
  it("streams the signed log from any sequence, resumes without loss or repeats, and ends when the group is dissolved", async () => {
    await coordinator.create("log");
    const invited = await coordinator.invite("log", a.ref);
    await a.client.join("log", { invitationId: invited.reply.header.replyTo });
    await coordinator.invite("log", b.ref);
    await coordinator.remove("log", b.ref.agentId);
    // Read three events, then drop the stream.
    const abort = new AbortController();
    const firstPart: number[] = [];
    for await (const item of a.client.watch("log", { signal: abort.signal })) {
      if (item.kind === "snapshot") expect(item.group.lastSequence).toBe(5n);
      if (item.kind !== "event") continue;
      firstPart.push(item.event.sequence);
      if (firstPart.length === 3) break;
    }
    abort.abort();
    expect(firstPart).toEqual([1, 2, 3]);
    // Resume from 4 while the log grows; the stream ends after the dissolution.
    const rest: Array<[number, GroupEventKind]> = [];
    const watching = (async () => {
      for await (const item of a.client.watch("log", { fromSequence: 4 })) if (item.kind === "event") rest.push([item.event.sequence, item.event.payload.kind]);
    })();
    await coordinator.invite("log", c.ref);
    await coordinator.dissolve("log");
    await watching;
    expect(rest).toEqual([
      [4, GroupEventKind.MEMBER_INVITED],
      [5, GroupEventKind.MEMBERSHIP_WITHDRAWN],
      [6, GroupEventKind.MEMBER_INVITED],
      [7, GroupEventKind.GROUP_DISSOLVED],
    ]);
    // Every event is signed by the host, addressed to the group, and carries the signed message that caused it.
    const all: number[] = [];
    for await (const item of a.client.watch("log", { fromSequence: 2 })) {
      if (item.kind !== "event") continue;
      all.push(item.event.sequence);
      expect(item.event.header.sender?.agentId).toBe(host.ref.agentId);
      expect(item.event.header.receiver?.agentId).toBe("log");
      expect(item.event.payload.cause?.signature?.value.byteLength).toBe(64);
    }
    expect(all).toEqual([2, 3, 4, 5, 6, 7]);
    // A stranger cannot watch it.
    const stranger = await userClient(host.url);
    await expect((async () => { for await (const _ of stranger.watch("log")) void _; })()).rejects.toMatchObject({ code: Code.NotFound });
  });
});

describe("declared interfaces", () => {
  it("a host declares the three group interfaces with the RPCs that provide them, and support_groups", async () => {
    const capabilities = createClient(CapabilitiesService, createConnectTransport({ baseUrl: host.url, httpVersion: "1.1" }));
    const { interfaces } = await capabilities.getSupportedInterfaces({});
    const group = interfaces.filter((entry) => entry.category === InterfaceCategory.GROUP);
    expect(group.map((entry) => entry.name)).toEqual(["GroupTaskHandler", "GroupManager", "VotingHandler"]);
    for (const entry of group) expect(JSON.stringify(entry.metadata)).toContain("synapse.v1.GroupService/");
    expect((await capabilities.getCapabilities({})).capabilities?.supportGroups).toBe(true);
  });

  it("an agent declares groups only when it serves them", async () => {
    const storage = memoryStorage();
    const make = async (groups: boolean) =>
      createAgent({ identity: (await loadOrCreateIdentity(await tempDir())).identity, capabilities: defaultAgentCapabilities(), handlers: new Map(), trust: PinnedKeys.inMemory(), store: storage.tasks, groups });
    await expect(startServer({ agent: await make(true), port: 0 })).rejects.toThrow(TypeError);
    expect(() => createGroupHost({ agent: undefined as never, storage: storage.groups })).toThrow();
    const plain = await make(false);
    expect(() => createGroupHost({ agent: plain, storage: storage.groups })).toThrow(/groups: true/);
  });
});
