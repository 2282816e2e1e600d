// Page tokens for ListTasks: the position after the last task of a page
// (created_at, then task id), opaque to clients and checked when read back.
import type { TaskRecord } from "./store.js";

export interface TaskCursor {
  createdAtMs: number;
  taskId: string;
}

export function encodeTaskCursor(task: Pick<TaskRecord, "createdAtMs" | "taskId">): string {
  return Buffer.from(JSON.stringify({ c: task.createdAtMs, t: task.taskId })).toString("base64url");
}

/** RangeError when the token is not one of ours. */
export function decodeTaskCursor(token: string): TaskCursor {
  try {
    const parsed = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as { c: unknown; t: unknown };
    if (typeof parsed.c === "number" && Number.isSafeInteger(parsed.c) && typeof parsed.t === "string") return { createdAtMs: parsed.c, taskId: parsed.t };
  } catch {
    // fall through
  }
  throw new RangeError("page_token is not one this server issued");
}
