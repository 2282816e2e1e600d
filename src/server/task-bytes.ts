// The binary Task view of a record, written directly: every waited Send
// replies with its task, and building a Task message (two Timestamps, two
// AgentRefs) only for protobuf-es's reflective writer to encode it cost more
// than writing its fields into a buffer of the right size. The bytes are what
// toBinary(TaskSchema, taskView(record, { withRequest: false })) writes, the
// result being the bytes it was signed or stored as (a test checks both). A
// record this does not cover (a pending question or decision, an error or
// rejection, a result with no bytes kept, a number out of the plain range)
// gets undefined, and the caller builds the message as before.
import type { TaskRecord } from "../store/store.js";
import { knownEncoding } from "../protocol/encoded.js";
import { delimited, FieldWriter, INT32_LIMIT, noUnknown, plainBelow, sizeAgent, sizeText, sizeTimestamp, sizeVarintField, UINT32_LIMIT } from "../protocol/sized-writer.js";

// Tags (field number << 3 | wire type) of synapse.v1.Task's fields.
const TASK_ID = 0x0a; // 1
const TASK_TYPE = 0x12; // 2
const STATE = 0x18; // 3, varint
const PROGRESS = 0x20; // 4, varint
const STATUS_MESSAGE = 0x2a; // 5
const REQUESTER = 0x32; // 6
const EXECUTOR = 0x3a; // 7
const CREATED_AT = 0x42; // 8
const UPDATED_AT = 0x4a; // 9
const LAST_SEQUENCE = 0x50; // 10, varint
const RESULT = 0x6a; // 13

/** A time the writer covers: whole milliseconds from 1970 to 2106 (Timestamp seconds below 2^32). */
const coveredMs = (ms: number) => plainBelow(ms, UINT32_LIMIT * 1000);

/** A Timestamp's seconds and nanos from milliseconds, as timestampFromMs makes them (for 0 <= ms, whole). */
const seconds = (ms: number) => Math.floor(ms / 1000);
const nanos = (ms: number) => (ms - seconds(ms) * 1000) * 1_000_000;

/** The binary Task view of `record` without its request (what a Send reply shows), or undefined when not covered here. */
export function taskViewBytes(record: TaskRecord): Uint8Array | undefined {
  if (record.confidential !== undefined) return undefined;
  if (record.pendingInfo !== undefined || record.pendingDecision !== undefined || record.error !== undefined || record.rejection !== undefined) return undefined;
  const result = record.result === undefined ? undefined : knownEncoding(record.result);
  if (record.result !== undefined && result === undefined) return undefined;
  if (!plainBelow(record.state, INT32_LIMIT) || !plainBelow(record.progress, UINT32_LIMIT) || !plainBelow(record.lastSequence, UINT32_LIMIT)) return undefined;
  if (!coveredMs(record.createdAtMs) || !coveredMs(record.updatedAtMs)) return undefined;
  if (!noUnknown(record.requester) || !noUnknown(record.executor)) return undefined;

  const texts: number[] = [];
  const size =
    sizeText(record.taskId, texts) +
    sizeText(record.taskType, texts) +
    sizeVarintField(record.state) +
    sizeVarintField(record.progress) +
    sizeText(record.statusMessage, texts) +
    sizeAgent(record.requester, texts) +
    sizeAgent(record.executor, texts) +
    sizeTimestamp(seconds(record.createdAtMs), nanos(record.createdAtMs)) +
    sizeTimestamp(seconds(record.updatedAtMs), nanos(record.updatedAtMs)) +
    sizeVarintField(record.lastSequence) +
    (result === undefined ? 0 : delimited(result.byteLength));
  const out = new FieldWriter(size, texts, "task view");
  out.textField(TASK_ID, record.taskId);
  out.textField(TASK_TYPE, record.taskType);
  out.varintField(STATE, record.state);
  out.varintField(PROGRESS, record.progress);
  out.textField(STATUS_MESSAGE, record.statusMessage);
  out.agent(REQUESTER, record.requester);
  out.agent(EXECUTOR, record.executor);
  out.timestamp(CREATED_AT, seconds(record.createdAtMs), nanos(record.createdAtMs));
  out.timestamp(UPDATED_AT, seconds(record.updatedAtMs), nanos(record.updatedAtMs));
  out.varintField(LAST_SEQUENCE, record.lastSequence);
  if (result !== undefined) out.messageField(RESULT, result);
  return out.done();
}
