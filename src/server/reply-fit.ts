// Replies that show a task (Send, GetTask, Watch's snapshot, ListTasks) must
// fit the server's message limit: a request the server accepted must get its
// reply. The task view echoes the task's request (Task.request), which may
// itself be as large as the limit; when the reply would not fit, the view
// leaves the request out (the requester has it). Measuring a message costs an
// encoding, so a cheap walk first bounds its size from above and only replies
// near the limit are measured exactly, in the format the caller reads.
import { toBinary, toJsonString, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import type { Task } from "../../gen/synapse/v1/p2p_pb.js";

export type ReplyFormat = "binary" | "json";

/** The format of the reply: JSON for the JSON codecs (and GET with encoding=json), else binary. */
export function replyFormat(ctx: HandlerContext): ReplyFormat {
  const contentType = ctx.requestHeader.get("content-type");
  if (contentType === null) return new URL(ctx.url, "http://localhost").searchParams.get("encoding") === "json" ? "json" : "binary";
  return /json/i.test(contentType) ? "json" : "binary";
}

// Upper bounds of what each kind of value costs in either encoding: a string
// char is at most 6 JSON bytes ("\u0001") and 3 UTF-8 bytes; bytes are base64
// in JSON; a number, bool or enum is at most a 9-byte varint, a double, or a
// JSON number or enum name; a key is a field name or map key.
const STRING_CHAR = 6;
const SCALAR = 48;
const OVERHEAD = 8;

/** True when the value surely encodes within `budget` bytes in binary and in JSON; walks no further than that. */
export function surelyWithin(value: unknown, budget: number): boolean {
  const stack: unknown[] = [value];
  let used = 0;
  while (stack.length > 0) {
    const item = stack.pop();
    if (typeof item === "string") used += STRING_CHAR * item.length + OVERHEAD;
    else if (item instanceof Uint8Array) used += 2 * item.byteLength + OVERHEAD;
    else if (Array.isArray(item)) {
      used += OVERHEAD;
      for (const entry of item) stack.push(entry);
    } else if (item !== null && typeof item === "object") {
      for (const [key, entry] of Object.entries(item)) {
        if (key === "$typeName") continue;
        used += key.length * STRING_CHAR + OVERHEAD;
        stack.push(entry);
      }
    } else used += SCALAR;
    if (used > budget) return false;
  }
  return true;
}

/** Whether the message encodes within `limit` bytes in `format`. */
export function fits<Desc extends DescMessage>(schema: Desc, message: MessageShape<Desc>, format: ReplyFormat, limit: number): boolean {
  if (surelyWithin(message, limit)) return true;
  const size = format === "binary" ? toBinary(schema, message).byteLength : Buffer.byteLength(toJsonString(schema, message));
  return size <= limit;
}

/** The reply, with Task.request left out of the tasks it shows when it would not fit otherwise. */
export function fitTasks<Desc extends DescMessage>(schema: Desc, reply: MessageShape<Desc>, tasks: Array<Task | undefined>, format: ReplyFormat, limit: number): MessageShape<Desc> {
  if (fits(schema, reply, format, limit)) return reply;
  for (const task of tasks) if (task !== undefined) task.request = undefined;
  return reply;
}

/**
 * A page of a list whose reply fits the message limit: when the page read
 * for `size` items would not fit, it is read again with half as many (its
 * next-page token then starts after the last item shown), down to one item.
 * A page the caller may ask for is never refused for being too large.
 */
export async function fittedPage<Desc extends DescMessage>(
  schema: Desc,
  size: number,
  read: (size: number) => Promise<MessageShape<Desc>>,
  format: ReplyFormat,
  limit: number,
): Promise<MessageShape<Desc>> {
  let reply = await read(size);
  while (size > 1 && !fits(schema, reply, format, limit)) {
    size = Math.floor(size / 2);
    reply = await read(size);
  }
  return reply;
}
