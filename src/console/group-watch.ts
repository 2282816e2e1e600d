// Follows one group with GroupService.WatchGroup: the snapshot, then every
// event of its log from a sequence, live. A dropped stream is resumed from
// the next sequence the caller wants (with a fresh token), so nothing is
// missed or repeated; verification is the caller's (group-log.ts).
import type { Envelope } from "../../gen/synapse/v1/envelope_pb.js";
import type { Group } from "../../gen/synapse/v1/group_pb.js";
import { groupService, type Session } from "./rpc.js";
import { followStream } from "./watch.js";

export interface GroupFollowHandlers {
  /** The group as the host shows it when a stream opens (unsigned). */
  snapshot(group: Group): void;
  /** A signed event, in sequence order. */
  event(sequence: bigint, envelope: Envelope | undefined): void;
  /** The stream dropped; it is opened again from `fromSequence`. */
  reconnecting(fromSequence: bigint): void;
}

/**
 * Resolves when the host ends the stream (the group was dissolved, or this
 * identity left it) or `signal` aborts; rejects on a refusal (NOT_FOUND,
 * UNAUTHENTICATED) or after repeated connection failures. `next()` says
 * where to resume: the log's next sequence.
 */
export function followGroup(session: Session, groupId: string, next: () => bigint, handlers: GroupFollowHandlers, signal: AbortSignal): Promise<void> {
  return followStream(session, (from, headers) => groupService.watchGroup({ groupId, fromSequence: from }, { headers, signal }), next, handlers, signal);
}
