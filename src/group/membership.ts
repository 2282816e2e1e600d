// GroupManager's rules (docs/PROTOCOL.md §7.3): who may create, invite,
// join, approve, change roles, leave, remove and dissolve, as pure
// functions from the group now and a verified message to the group after
// it and the events that record it. Nobody becomes a member without two
// signatures in the log: a coordinator's (invite or approve) and the
// agent's own (create or join). The role a member holds is always one a
// coordinator signed: the invitation's, the approval's (never the wish of
// the request), or a later a2n:member_role.
import { clone, create } from "@bufbuild/protobuf";
import { timestampDate, timestampFromMs, timestampMs } from "@bufbuild/protobuf/wkt";
import {
  GroupEventKind,
  GroupMemberSchema,
  GroupRole,
  type GroupCreatePayload,
  type GroupMember,
  type MemberApprovePayload,
  type MemberInvitePayload,
  type MemberJoinPayload,
  type MemberRemovePayload,
  type MemberRolePayload,
} from "../../gen/synapse/v1/a2n_pb.js";
import { GroupSchema, GroupStatus, PendingKind, PendingMembershipSchema, type Group } from "../../gen/synapse/v1/group_pb.js";
import type { OpenedEnvelope } from "../envelope/open.js";
import { clip } from "../protocol/errors.js";
import { causedBy, type EventDraft } from "./log.js";
import {
  checkId,
  checkRole,
  checkText,
  checkWeight,
  denied,
  invalidParams,
  LIMITS,
  memberOf,
  refusedNow,
  requireActive,
  requireCoordinator,
  requireMember,
  roleName,
} from "./rules.js";

export interface Signer {
  agentId: string;
  systemId: string;
  keyId: string;
  publicKey: Uint8Array;
}

export const signerOf = (opened: OpenedEnvelope): Signer => ({
  agentId: opened.header.sender!.agentId,
  systemId: opened.header.sender!.systemId,
  keyId: opened.header.sender!.keyId,
  publicKey: opened.publicKey,
});

export interface MembershipChange {
  group: Group;
  events: EventDraft[];
}

/** Unset roles in invitations, join requests and approvals mean member. */
const roleOrMember = (role: GroupRole) => (role === GroupRole.UNSPECIFIED ? GroupRole.MEMBER : role);

const sentAtMs = (opened: OpenedEnvelope) => (opened.header.sentAt ? timestampMs(opened.header.sentAt) : Date.now());

function newMember(signer: Signer, role: GroupRole, weight: number, endpointUrl: string, atMs: number, consent: string, admittedBy: string): GroupMember {
  return create(GroupMemberSchema, {
    agent: { agentId: signer.agentId, systemId: signer.systemId, keyId: signer.keyId },
    publicKey: signer.publicKey,
    role,
    weight,
    endpointUrl,
    joinedAt: timestampFromMs(atMs),
    consentMessageId: consent,
    admittedByMessageId: admittedBy,
  });
}

function checkRoom(group: Group): void {
  if (group.members.length + group.pending.length >= LIMITS.parties) {
    throw invalidParams(`a group has at most ${LIMITS.parties} members and pending memberships`, { rule: "group_full" });
  }
}

export function createGroup(opened: OpenedEnvelope, host: { agentId: string; systemId: string; keyId: string }, atMs: number): MembershipChange {
  const payload = opened.payload as GroupCreatePayload;
  const signer = signerOf(opened);
  checkId("group_id", payload.groupId);
  checkText("name", payload.name, LIMITS.nameChars);
  checkText("description", payload.description);
  const creator = newMember(signer, GroupRole.COORDINATOR, checkWeight(payload.weight), payload.endpointUrl, atMs, opened.header.messageId, "");
  const group = create(GroupSchema, {
    groupId: payload.groupId,
    name: payload.name,
    description: payload.description,
    host,
    status: GroupStatus.ACTIVE,
    members: [creator],
    createdBy: creator.agent,
  });
  return { group, events: [{ kind: GroupEventKind.GROUP_CREATED, ...causedBy(opened), member: creator }] };
}

export function invite(current: Group, opened: OpenedEnvelope): MembershipChange {
  const payload = opened.payload as MemberInvitePayload;
  requireActive(current);
  requireCoordinator(current, opened.header.sender!.agentId, "invite");
  const invitee = payload.invitee;
  if (invitee === undefined || invitee.agentId === "" || invitee.keyId === "") {
    throw invalidParams("invitee.agent_id and invitee.key_id are required: the key that must sign the acceptance", { field: "invitee" });
  }
  checkText("invitee.agent_id", invitee.agentId, LIMITS.nameChars);
  checkText("note", payload.note);
  const role = checkRole(roleOrMember(payload.role));
  const weight = checkWeight(payload.weight);
  const sent = sentAtMs(opened);
  const expiresAtMs = payload.expiresAt ? timestampMs(payload.expiresAt) : sent + LIMITS.invitationTtlMs;
  if (expiresAtMs <= sent || expiresAtMs > sent + 4 * LIMITS.invitationTtlMs) {
    throw invalidParams("expires_at must be after sent_at and within 28 days of it", { field: "expires_at" });
  }
  const existing = memberOf(current, invitee.agentId);
  if (existing !== undefined && existing.role === role && existing.weight === weight) {
    throw refusedNow("nothing_to_change", `${clip(invitee.agentId)} is already a ${roleName(role)} with weight ${weight}`);
  }
  const group = clone(GroupSchema, current);
  // An agent has at most one invitation open: the newest replaces the others.
  group.pending = group.pending.filter((entry) => !(entry.kind === PendingKind.INVITATION && entry.agent?.agentId === invitee.agentId));
  checkRoom(group);
  const pending = create(PendingMembershipSchema, {
    kind: PendingKind.INVITATION,
    agent: { agentId: invitee.agentId, systemId: invitee.systemId, keyId: invitee.keyId },
    role,
    weight,
    messageId: opened.header.messageId,
    expiresAt: timestampFromMs(expiresAtMs),
    note: payload.note,
  });
  group.pending.push(pending);
  const proposed = create(GroupMemberSchema, { agent: pending.agent, role, weight });
  return { group, events: [{ kind: GroupEventKind.MEMBER_INVITED, ...causedBy(opened), member: proposed }] };
}

/**
 * An agent's own consent. The endpoint, when given, has been confirmed to
 * answer as the signer before this runs.
 */
export function join(current: Group, opened: OpenedEnvelope, atMs: number): MembershipChange {
  const payload = opened.payload as MemberJoinPayload;
  requireActive(current);
  checkText("note", payload.note);
  const signer = signerOf(opened);
  const group = clone(GroupSchema, current);
  const existing = memberOf(group, signer.agentId);
  if (payload.invitationId !== "") {
    const index = group.pending.findIndex((entry) => entry.kind === PendingKind.INVITATION && entry.messageId === payload.invitationId);
    const invitation = group.pending[index];
    // Someone else's invitation, or none: to this sender the invitation does not exist.
    if (invitation === undefined || invitation.agent?.agentId !== signer.agentId) {
      throw invalidParams(`no invitation ${clip(payload.invitationId)} for ${clip(signer.agentId)}`, { rule: "no_invitation" });
    }
    if (invitation.agent.keyId !== signer.keyId) {
      throw denied("invited_key", `the invitation is for key ${invitation.agent.keyId}; this message is signed by ${signer.keyId}`);
    }
    if (invitation.expiresAt && timestampMs(invitation.expiresAt) <= atMs) {
      throw refusedNow("invitation_expired", `invitation ${clip(payload.invitationId)} expired at ${timestampDate(invitation.expiresAt).toISOString()}`);
    }
    group.pending.splice(index, 1);
    if (existing !== undefined) {
      existing.role = invitation.role;
      existing.weight = invitation.weight;
      if (payload.endpointUrl !== "") existing.endpointUrl = payload.endpointUrl;
      existing.consentMessageId = opened.header.messageId;
      existing.admittedByMessageId = invitation.messageId;
      existing.roleChangedByMessageId = "";
      return { group, events: [{ kind: GroupEventKind.MEMBER_UPDATED, ...causedBy(opened), member: existing }] };
    }
    const member = newMember(signer, invitation.role, invitation.weight, payload.endpointUrl, atMs, opened.header.messageId, invitation.messageId);
    group.members.push(member);
    return { group, events: [{ kind: GroupEventKind.MEMBER_ADDED, ...causedBy(opened), member }] };
  }
  if (existing !== undefined) {
    if (payload.endpointUrl === "" || payload.endpointUrl === existing.endpointUrl) {
      throw refusedNow("nothing_to_change", `${clip(signer.agentId)} is a member already; a join without invitation_id changes only its endpoint_url`);
    }
    existing.endpointUrl = payload.endpointUrl;
    return { group, events: [{ kind: GroupEventKind.MEMBER_UPDATED, ...causedBy(opened), member: existing }] };
  }
  group.pending = group.pending.filter((entry) => !(entry.kind === PendingKind.JOIN_REQUEST && entry.agent?.agentId === signer.agentId));
  checkRoom(group);
  // The role asked for is only a wish: the approval names the role granted.
  const role = checkRole(roleOrMember(payload.role));
  group.pending.push(
    create(PendingMembershipSchema, {
      kind: PendingKind.JOIN_REQUEST,
      agent: { agentId: signer.agentId, systemId: signer.systemId, keyId: signer.keyId },
      role,
      endpointUrl: payload.endpointUrl,
      messageId: opened.header.messageId,
      note: payload.note,
      publicKey: signer.publicKey,
    }),
  );
  const asked = create(GroupMemberSchema, { agent: { agentId: signer.agentId, systemId: signer.systemId, keyId: signer.keyId }, role, endpointUrl: payload.endpointUrl });
  return { group, events: [{ kind: GroupEventKind.JOIN_REQUESTED, ...causedBy(opened), member: asked }] };
}

export function approve(current: Group, opened: OpenedEnvelope, atMs: number): MembershipChange {
  const payload = opened.payload as MemberApprovePayload;
  requireActive(current);
  requireCoordinator(current, opened.header.sender!.agentId, "approve a join request");
  const role = checkRole(roleOrMember(payload.role));
  const group = clone(GroupSchema, current);
  const index = group.pending.findIndex((entry) => entry.kind === PendingKind.JOIN_REQUEST && entry.messageId === payload.requestId);
  const request = group.pending[index];
  if (request === undefined || request.agent === undefined) throw invalidParams(`no join request ${clip(payload.requestId)}`, { rule: "no_join_request" });
  group.pending.splice(index, 1);
  const signer: Signer = { agentId: request.agent.agentId, systemId: request.agent.systemId, keyId: request.agent.keyId, publicKey: request.publicKey };
  const member = newMember(signer, role, checkWeight(payload.weight), request.endpointUrl, atMs, request.messageId, opened.header.messageId);
  group.members.push(member);
  return { group, events: [{ kind: GroupEventKind.MEMBER_ADDED, ...causedBy(opened), member }] };
}

const coordinators = (group: Group) => group.members.filter((member) => member.role === GroupRole.COORDINATOR).length;

/** A coordinator's own act: another role (and optionally weight) for a member; the group keeps a coordinator. */
export function setRole(current: Group, opened: OpenedEnvelope): MembershipChange {
  const payload = opened.payload as MemberRolePayload;
  requireActive(current);
  requireCoordinator(current, opened.header.sender!.agentId, "change roles");
  checkText("reason", payload.reason);
  if (payload.role === GroupRole.UNSPECIFIED) throw invalidParams("role is required: coordinator, member or observer", { field: "role" });
  const role = checkRole(payload.role);
  const group = clone(GroupSchema, current);
  const member = memberOf(group, payload.agentId);
  if (member === undefined) throw invalidParams(`${clip(payload.agentId)} is not a member of group ${group.groupId}`, { rule: "not_a_member" });
  const weight = payload.weight === 0 ? member.weight : checkWeight(payload.weight);
  if (member.role === role && member.weight === weight) {
    throw refusedNow("nothing_to_change", `${clip(payload.agentId)} is already a ${roleName(role)} with weight ${weight}`);
  }
  if (member.role === GroupRole.COORDINATOR && role !== GroupRole.COORDINATOR && coordinators(current) === 1) {
    throw refusedNow("last_coordinator", "the last coordinator keeps its role: make another member coordinator first");
  }
  member.role = role;
  member.weight = weight;
  member.roleChangedByMessageId = opened.header.messageId;
  return { group, events: [{ kind: GroupEventKind.MEMBER_ROLE_CHANGED, ...causedBy(opened), member }] };
}

export function leave(current: Group, opened: OpenedEnvelope): MembershipChange {
  requireActive(current);
  const member = requireMember(current, opened.header.sender!.agentId);
  if (member.role === GroupRole.COORDINATOR && coordinators(current) === 1) {
    throw refusedNow("last_coordinator", "the last coordinator cannot leave: make another member coordinator first, or dissolve the group");
  }
  const group = clone(GroupSchema, current);
  group.members = group.members.filter((entry) => entry.agent?.agentId !== member.agent?.agentId);
  return { group, events: [{ kind: GroupEventKind.MEMBER_LEFT, ...causedBy(opened), member }] };
}

export function remove(current: Group, opened: OpenedEnvelope): MembershipChange {
  const payload = opened.payload as MemberRemovePayload;
  requireActive(current);
  const sender = opened.header.sender!.agentId;
  requireCoordinator(current, sender, "remove members");
  if (payload.agentId === sender) throw refusedNow("remove_self", "a coordinator leaves with a2n:member_leave, it does not remove itself");
  const group = clone(GroupSchema, current);
  const member = memberOf(group, payload.agentId);
  if (member !== undefined) {
    group.members = group.members.filter((entry) => entry !== member);
    return { group, events: [{ kind: GroupEventKind.MEMBER_REMOVED, ...causedBy(opened), member }] };
  }
  const before = group.pending.length;
  group.pending = group.pending.filter((entry) => entry.agent?.agentId !== payload.agentId);
  if (group.pending.length === before) throw invalidParams(`${clip(payload.agentId)} is neither a member nor invited nor asking to join`, { rule: "not_a_party" });
  const withdrawn = create(GroupMemberSchema, { agent: { agentId: payload.agentId } });
  return { group, events: [{ kind: GroupEventKind.MEMBERSHIP_WITHDRAWN, ...causedBy(opened), member: withdrawn }] };
}

/** Marks the group dissolved; what it does to running group tasks and open votes is the host's (see host.ts). */
export function dissolve(current: Group, opened: OpenedEnvelope): MembershipChange {
  requireActive(current);
  requireCoordinator(current, opened.header.sender!.agentId, "dissolve the group");
  const group = clone(GroupSchema, current);
  group.status = GroupStatus.DISSOLVED;
  group.pending = [];
  return { group, events: [{ kind: GroupEventKind.GROUP_DISSOLVED, ...causedBy(opened) }] };
}
