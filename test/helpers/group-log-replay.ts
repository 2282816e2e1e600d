// Rebuilds a group's membership from its signed log alone, as
// docs/PROTOCOL.md §7.4 tells a reader to, and checks what the log must
// prove: every cause verifies with its signer's key; every role a member
// holds was signed by a coordinator (the invitation it accepted, the
// approval that admitted it, or a later a2n:member_role), never taken from
// the wish of its own join request; and the rebuilt members are the group's.
import {
  GroupEventKind,
  GroupRole,
  type GroupMember,
  type MemberApprovePayload,
  type MemberInvitePayload,
  type MemberJoinPayload,
  type MemberRolePayload,
} from "../../gen/synapse/v1/a2n_pb.js";
import { MessageType, type Envelope } from "../../gen/synapse/v1/envelope_pb.js";
import type { Group } from "../../gen/synapse/v1/group_pb.js";
import type { VerifiedGroupEvent } from "../../src/client/group-client.js";
import { open, type OpenedEnvelope } from "../../src/envelope/open.js";
import { decodeUnverified } from "../../src/envelope/view.js";

const roleOrMember = (role: GroupRole) => (role === GroupRole.UNSPECIFIED ? GroupRole.MEMBER : role);

/** Opens a cause with exactly one key: the one the log says its sender had. */
async function verifyCause(cause: Envelope, hostId: string, agentId: string, publicKey: Uint8Array | undefined): Promise<OpenedEnvelope> {
  if (publicKey === undefined) throw new Error(`no key known for ${agentId}`);
  const opened = await open(cause, {
    trust: { publicKeyFor: () => publicKey, check: (id) => (id === agentId ? { kind: "trusted" } : { kind: "unknown" }) },
    self: hostId,
    checkTime: false,
  });
  if (opened.header.sender?.agentId !== agentId) throw new Error(`cause signed by ${opened.header.sender?.agentId}, expected ${agentId}`);
  return opened;
}

export interface Replayed {
  members: Map<string, GroupMember>;
  /** One line per event: "kind agent role", to assert the story the log tells. */
  story: string[];
}

/** Replays `events` (from sequence 1, already verified as the host's) and throws at the first thing the log does not prove. */
export async function replayGroupLog(events: readonly VerifiedGroupEvent[], hostId: string, group?: Group): Promise<Replayed> {
  const members = new Map<string, GroupMember>();
  const invitations = new Map<string, { role: GroupRole; weight: number; agentId: string }>();
  const requests = new Map<string, Envelope>();
  const story: string[] = [];
  const coordinatorKey = (agentId: string | undefined) => {
    const member = agentId === undefined ? undefined : members.get(agentId);
    if (member?.role !== GroupRole.COORDINATOR) throw new Error(`${agentId} was not a coordinator when it signed`);
    return member.publicKey;
  };
  for (const [index, event] of events.entries()) {
    if (event.sequence !== index + 1) throw new Error(`event ${event.sequence} where ${index + 1} was due`);
    const { kind, cause, member } = event.payload;
    const agentId = member?.agent?.agentId ?? "";
    const sender = cause === undefined ? undefined : decodeSender(cause);
    story.push(`${GroupEventKind[kind]} ${agentId} ${member ? GroupRole[member.role] : ""}`.trim());
    switch (kind) {
      case GroupEventKind.GROUP_CREATED:
        await verifyCause(cause!, hostId, agentId, member!.publicKey);
        members.set(agentId, member!);
        break;
      case GroupEventKind.MEMBER_INVITED: {
        const opened = await verifyCause(cause!, hostId, sender!, coordinatorKey(sender));
        const payload = opened.payload as MemberInvitePayload;
        invitations.set(opened.header.messageId, { role: roleOrMember(payload.role), weight: member!.weight, agentId: payload.invitee!.agentId });
        break;
      }
      case GroupEventKind.JOIN_REQUESTED:
        // Verified once the key it was signed with is in the log (MEMBER_ADDED carries it).
        requests.set(decodeId(cause!), cause!);
        break;
      case GroupEventKind.MEMBER_ADDED: {
        const opened = await verifyCause(cause!, hostId, sender!, sender === agentId ? member!.publicKey : coordinatorKey(sender));
        if (opened.header.messageType === MessageType.A2N_MEMBER_APPROVE) {
          const approval = opened.payload as MemberApprovePayload;
          const request = requests.get(approval.requestId);
          if (request === undefined || approval.requestId !== member!.consentMessageId) throw new Error(`approval of unknown request ${approval.requestId}`);
          await verifyCause(request, hostId, agentId, member!.publicKey);
          if (member!.role !== roleOrMember(approval.role)) throw new Error(`${agentId} added as ${GroupRole[member!.role]}, the approval granted ${GroupRole[roleOrMember(approval.role)]}`);
        } else {
          const invitation = invitations.get((opened.payload as MemberJoinPayload).invitationId);
          if (invitation === undefined || invitation.agentId !== agentId || invitation.role !== member!.role) throw new Error(`${agentId} added without the invitation for its role`);
        }
        members.set(agentId, member!);
        break;
      }
      case GroupEventKind.MEMBER_UPDATED: {
        const opened = await verifyCause(cause!, hostId, agentId, members.get(agentId)?.publicKey);
        const invitationId = (opened.payload as MemberJoinPayload).invitationId;
        const before = members.get(agentId)!;
        if (invitationId === "" ? member!.role !== before.role : invitations.get(invitationId)?.role !== member!.role) throw new Error(`${agentId} took a role nobody offered`);
        members.set(agentId, member!);
        break;
      }
      case GroupEventKind.MEMBER_ROLE_CHANGED: {
        const opened = await verifyCause(cause!, hostId, sender!, coordinatorKey(sender));
        const payload = opened.payload as MemberRolePayload;
        if (payload.agentId !== agentId || payload.role !== member!.role || member!.roleChangedByMessageId !== opened.header.messageId) throw new Error(`role change of ${agentId} differs from its cause`);
        members.set(agentId, member!);
        break;
      }
      case GroupEventKind.MEMBER_LEFT:
        await verifyCause(cause!, hostId, agentId, members.get(agentId)?.publicKey);
        members.delete(agentId);
        break;
      case GroupEventKind.MEMBER_REMOVED:
        await verifyCause(cause!, hostId, sender!, coordinatorKey(sender));
        members.delete(agentId);
        break;
      default:
        break;
    }
  }
  if (group !== undefined) {
    const rebuilt = [...members.values()].map((m) => [m.agent?.agentId, m.role, m.weight]);
    const actual = group.members.map((m) => [m.agent?.agentId, m.role, m.weight]);
    if (JSON.stringify(rebuilt) !== JSON.stringify(actual)) throw new Error(`the log rebuilds ${JSON.stringify(rebuilt)}, the group has ${JSON.stringify(actual)}`);
  }
  return { members, story };
}

function decodeSender(cause: Envelope): string {
  return decodeUnverified(cause).header.sender?.agentId ?? "";
}

function decodeId(cause: Envelope): string {
  return decodeUnverified(cause).header.messageId;
}
