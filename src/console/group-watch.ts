// Follows one group with GroupService.WatchGroup: the snapshot, then every
// event of its log from a sequence, live. A dropped stream is resumed from
// the next sequence the caller wants (with a fresh token), so nothing is
// missed or repeated; verification is the caller's (group-log.ts).
import { ConnectError } from "@connectrpc/connect";
import type { Envelope } from "../../gen/synapse/v1/envelope_pb.js";
import type { Group } from "../../gen/synapse/v1/group_pb.js";
import { groupService, RESUMABLE, type Session } from "./rpc.js";
import { MAX_RETRIES, pause } from "./watch.js";

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
export async function followGroup(session: Session, groupId: string, next: () => bigint, handlers: GroupFollowHandlers, signal: AbortSignal): Promise<void> {
  let failures = 0;
  while (!signal.aborted) {
    try {
      const headers = await session.authHeaders();
      for await (const message of groupService.watchGroup({ groupId, fromSequence: next() }, { headers, signal })) {
        failures = 0;
        if (signal.aborted) return;
        if (message.kind.case === "snapshot") handlers.snapshot(message.kind.value);
        else if (message.kind.case === "event") {
          const event = message.kind.value;
          if (event.sequence < next()) continue; // already handed over before a resume
          handlers.event(event.sequence, event.message?.envelope);
        }
        // A heartbeat only keeps the stream open.
      }
      return;
    } catch (error) {
      if (signal.aborted) return;
      const connectError = ConnectError.from(error);
      if (!RESUMABLE.has(connectError.code) || failures >= MAX_RETRIES) throw connectError;
      failures++;
      handlers.reconnecting(next());
      await pause(500 * 2 ** (failures - 1), signal);
    }
  }
}
