// How group records become table rows and back, for the SQL stores: the
// views as their binary encoding, events as the exact envelope bytes.
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import type { GroupEventPayload } from "../../gen/synapse/v1/a2n_pb.js";
import { GroupSchema, GroupTaskSchema, VoteSchema, VoteState, type GroupTask, type Vote } from "../../gen/synapse/v1/group_pb.js";
import { decodeSigned, envelopeBytes } from "./codec.js";
import type { GroupRecord, StoredGroupEvent } from "./group-storage.js";
import { isActiveGroupTask } from "./memory/groups.js";
import type { SeenMessage } from "./store.js";

export interface GroupRow {
  group_id: string;
  record: Uint8Array;
  version: number;
  last_sequence: number;
  status: number;
  created_at_ms: number;
  updated_at_ms: number;
}

export const groupFromRow = (row: GroupRow): GroupRecord => ({
  groupId: row.group_id,
  group: fromBinary(GroupSchema, row.record),
  version: row.version,
  lastSequence: row.last_sequence,
  createdAtMs: Number(row.created_at_ms),
  updatedAtMs: Number(row.updated_at_ms),
});

export const groupBytes = (record: GroupRecord) => Buffer.from(toBinary(GroupSchema, record.group));

export function groupEventFromBytes(groupId: string, sequence: number, bytes: Uint8Array): StoredGroupEvent {
  const decoded = decodeSigned(bytes);
  return { groupId, sequence, envelope: decoded.envelope, header: decoded.header, payload: decoded.payload as GroupEventPayload };
}

export const groupEventBytes = (event: StoredGroupEvent) => envelopeBytes(event.envelope);

/** Column values of a group task: the record, whether it still runs, when it was submitted. */
export function groupTaskColumns(task: GroupTask): { record: Buffer; active: number; createdAtMs: number } {
  return {
    record: Buffer.from(toBinary(GroupTaskSchema, task)),
    active: isActiveGroupTask(task) ? 1 : 0,
    createdAtMs: task.createdAt ? timestampMs(task.createdAt) : 0,
  };
}

export const groupTaskFromBytes = (bytes: Uint8Array): GroupTask => fromBinary(GroupTaskSchema, bytes);

/** Column values of a vote: the record, whether it is open, its deadline, when it started. */
export function voteColumns(vote: Vote): { record: Buffer; open: number; deadlineMs: number; createdAtMs: number } {
  return {
    record: Buffer.from(toBinary(VoteSchema, vote)),
    open: vote.state === VoteState.OPEN ? 1 : 0,
    deadlineMs: vote.deadline ? timestampMs(vote.deadline) : 0,
    createdAtMs: vote.createdAt ? timestampMs(vote.createdAt) : 0,
  };
}

export const voteFromBytes = (bytes: Uint8Array): Vote => fromBinary(VoteSchema, bytes);

/** A seen message's columns, in insert order. */
export function messageColumns(entry: SeenMessage): Array<string | number | Buffer | null> {
  const reply = entry.reply === undefined ? null : envelopeBytes(entry.reply.envelope);
  return [entry.scope, entry.messageId, entry.senderAgentId, entry.digest, entry.keepUntilMs, entry.taskId ?? null, reply];
}
