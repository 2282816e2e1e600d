// The limits and refusals of the group protocol in one place, so that every
// module refuses the same way (docs/PROTOCOL.md §7.2 lists the checks).
import { Code } from "@connectrpc/connect";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import { GroupRole, type GroupMember } from "../../gen/synapse/v1/a2n_pb.js";
import { GroupStatus, type Group } from "../../gen/synapse/v1/group_pb.js";
import { clip, protocolError } from "../protocol/errors.js";

export const LIMITS = {
  idChars: 100,
  nameChars: 256,
  textChars: 4096,
  /** Members and pending memberships together. */
  parties: 100,
  weight: 1_000_000,
  options: 32,
  optionChars: 256,
  shards: 256,
  /** Open group tasks, and open votes, per group. */
  open: 100,
  invitationTtlMs: 7 * 24 * 3600 * 1000,
  voteHorizonMs: 30 * 24 * 3600 * 1000,
  defaultMemberTimeoutMs: 300_000,
  maxMemberTimeoutMs: 24 * 3600 * 1000,
} as const;

const ID = /^[A-Za-z0-9._:-]+$/;

export function invalidParams(message: string, details: Record<string, string | number> = {}) {
  return protocolError(ErrorCode.INVALID_PARAMS, message, { details });
}

/** A request that names something the caller may not see or that does not exist: one answer for both. */
export function notFound(what: "group" | "group task" | "vote", id: string, groupId?: string) {
  const where = groupId === undefined ? "" : ` in group ${clip(groupId)}`;
  return protocolError(ErrorCode.INVALID_PARAMS, `no ${what} ${clip(id)}${where}`, { status: Code.NotFound, details: { rule: "not_found" } });
}

export function alreadyExists(what: string, id: string) {
  return protocolError(ErrorCode.INVALID_PARAMS, `${what} ${clip(id)} exists`, { status: Code.AlreadyExists, details: { rule: `${what.replace(/ /g, "_")}_exists` } });
}

export function tooMany(message: string) {
  return protocolError(ErrorCode.CONCURRENCY_LIMIT, message, { retryAfterSeconds: 10, details: { rule: "too_many_open" } });
}

export function denied(rule: string, message: string) {
  return protocolError(ErrorCode.PERMISSION_DENIED, message, { details: { rule } });
}

export function refusedNow(rule: string, message: string, details: Record<string, string | number> = {}) {
  return protocolError(ErrorCode.ILLEGAL_TRANSITION, message, { details: { rule, ...details } });
}

export function checkId(field: string, value: string): string {
  if (value.length === 0 || value.length > LIMITS.idChars || !ID.test(value)) {
    throw invalidParams(`${field} must be 1 to ${LIMITS.idChars} characters of A-Z a-z 0-9 . _ : -, got ${JSON.stringify(clip(value))}`, { field });
  }
  return value;
}

export function checkText(field: string, value: string, max: number = LIMITS.textChars): string {
  if (value.length > max) throw invalidParams(`${field} is longer than ${max} characters`, { field });
  return value;
}

export function checkWeight(weight: number): number {
  if (weight > LIMITS.weight) throw invalidParams(`weight must be at most ${LIMITS.weight}`, { field: "weight" });
  return weight === 0 ? 1 : weight;
}

/** A role this host knows (a number from a newer sender is refused, not stored). */
export function checkRole(role: GroupRole): GroupRole {
  if (GroupRole[role] === undefined) throw invalidParams(`role ${role} is not a GroupRole`, { field: "role" });
  return role;
}

export function memberOf(group: Group, agentId: string): GroupMember | undefined {
  return group.members.find((member) => member.agent?.agentId === agentId);
}

/** The member who sent a message, or NOT_FOUND: to anyone else the group does not exist. */
export function requireMember(group: Group, agentId: string): GroupMember {
  const member = memberOf(group, agentId);
  if (member === undefined) throw notFound("group", group.groupId);
  return member;
}

export function requireCoordinator(group: Group, agentId: string, action: string): GroupMember {
  const member = requireMember(group, agentId);
  if (member.role !== GroupRole.COORDINATOR) throw denied("coordinator_only", `only a coordinator may ${action}`);
  return member;
}

export function requireActive(group: Group): void {
  if (group.status !== GroupStatus.ACTIVE) throw refusedNow("group_dissolved", `group ${group.groupId} is dissolved`);
}

/** Coordinators and members vote and run sub-tasks; observers only read. */
export const takesPart = (member: GroupMember) => member.role === GroupRole.COORDINATOR || member.role === GroupRole.MEMBER;

export const roleName = (role: GroupRole) => (GroupRole[role] ?? "UNSPECIFIED").toLowerCase();
