// A finished task's row (codec.ts: the columns the SQL stores write) as
// bytes: each column in TASK_COLUMNS order, tagged with its kind. What the
// task holds twice is kept once: a result, error or rejection is the
// terminal event's payload or a part of it (so it is a reference into
// that event's bytes); an input that is the request's payload is already
// an empty payload column (codec.ts).
import { TASK_COLUMNS, type SqlValue, type TaskRow } from "../codec.js";

const NULL = 0;
const NUMBER = 1;
const TEXT = 2;
const BYTES = 3;
/** Bytes found in the terminal event: offset and length there. */
const IN_EVENT = 4;

type Row = Record<(typeof TASK_COLUMNS)[number], SqlValue>;

/** The row's bytes. `lastEvent`: the bytes of the task's terminal event. */
export function rowBytes(row: Row, lastEvent: Buffer | undefined): Buffer {
  const found = new Map<string, number>();
  let size = 0;
  for (const column of TASK_COLUMNS) {
    const value = row[column];
    size += 1;
    if (value === null) continue;
    if (typeof value === "number") size += 8;
    else if (typeof value === "string") size += 4 + Buffer.byteLength(value);
    else {
      const at = lastEvent === undefined || value.byteLength === 0 ? -1 : lastEvent.indexOf(value);
      if (at >= 0) found.set(column, at);
      size += at >= 0 ? 8 : 4 + value.byteLength;
    }
  }
  const out = Buffer.allocUnsafe(size); // copied into the packed task, then dropped
  let offset = 0;
  for (const column of TASK_COLUMNS) {
    const value = row[column];
    if (value === null) {
      out[offset++] = NULL;
    } else if (typeof value === "number") {
      out[offset++] = NUMBER;
      offset = out.writeDoubleLE(value, offset);
    } else if (typeof value === "string") {
      out[offset++] = TEXT;
      const length = out.write(value, offset + 4);
      out.writeUInt32LE(length, offset);
      offset += 4 + length;
    } else if (found.has(column)) {
      out[offset++] = IN_EVENT;
      offset = out.writeUInt32LE(found.get(column)!, offset);
      offset = out.writeUInt32LE(value.byteLength, offset);
    } else {
      out[offset++] = BYTES;
      offset = out.writeUInt32LE(value.byteLength, offset);
      out.set(value, offset);
      offset += value.byteLength;
    }
  }
  return out;
}

/** The row back. */
export function rowFrom(bytes: Buffer, lastEvent: Buffer | undefined): TaskRow {
  const row: Record<string, SqlValue> = {};
  let offset = 0;
  for (const column of TASK_COLUMNS) {
    const kind = bytes[offset++];
    if (kind === NULL) {
      row[column] = null;
    } else if (kind === NUMBER) {
      row[column] = bytes.readDoubleLE(offset);
      offset += 8;
    } else if (kind === IN_EVENT) {
      const at = bytes.readUInt32LE(offset);
      row[column] = lastEvent!.subarray(at, at + bytes.readUInt32LE(offset + 4));
      offset += 8;
    } else {
      const length = bytes.readUInt32LE(offset);
      offset += 4;
      row[column] = kind === TEXT ? bytes.toString("utf8", offset, offset + length) : bytes.subarray(offset, offset + length);
      offset += length;
    }
  }
  return row as unknown as TaskRow;
}
