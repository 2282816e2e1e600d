// The read side of the executor: a requester's tasks by id or page, a task's
// event log as a live stream that resumes from any sequence, and result
// streams that resume from any offset. A requester sees only its own tasks;
// an operator (a caller whose key is one of the agent's operator keys) sees
// every task, read-only: reading is all this module does.
import { create } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import { StreamChunkSchema, type StreamChunk } from "../../gen/synapse/v1/p2p_pb.js";
import type { TaskState } from "../../gen/synapse/v1/payloads_pb.js";
import { clip, protocolError, taskNotFound } from "../protocol/errors.js";
import { isTerminal } from "../protocol/state-machine.js";
import type { StoredEvent, StoredReply, TaskPage, TaskRecord, TaskStore } from "../store/store.js";
import type { TaskEventBus } from "./events.js";

export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 500;
export const RESULT_CHUNK_BYTES = 64 * 1024;

export type WatchItem =
  | { kind: "snapshot"; task: TaskRecord }
  | { kind: "event"; event: StoredEvent }
  | { kind: "heartbeat"; heartbeat: StoredReply };

export interface ReaderOptions {
  store: TaskStore;
  bus: TaskEventBus;
  heartbeatIntervalMs: number;
  /** A signed heartbeat addressed to the watching requester. */
  heartbeat: (task: TaskRecord) => Promise<StoredReply>;
}

/**
 * Who reads: an agent id (a requester, who sees its own tasks), or an
 * authenticated caller that may be an operator (who sees every task).
 */
export type TaskReaderCaller = string | { readonly agentId: string; readonly operator?: boolean };

/** Whether `caller` may read a task requested by `requesterAgentId`. */
function mayRead(caller: TaskReaderCaller, requesterAgentId: string): boolean {
  if (typeof caller === "string") return caller === requesterAgentId;
  return caller.operator === true || caller.agentId === requesterAgentId;
}

export class TaskReader {
  constructor(private readonly options: ReaderOptions) {}

  async getTask(taskId: string, caller: TaskReaderCaller): Promise<TaskRecord> {
    const task = await this.options.store.getTask(taskId);
    // Another requester's task is reported as absent, not as forbidden: ids are not secrets, but existence is.
    if (task === undefined || !mayRead(caller, task.requester.agentId)) throw taskNotFound(taskId);
    return task;
  }

  async listTasks(caller: TaskReaderCaller, pageSize: number, pageToken: string, states: readonly TaskState[], taskTypes: readonly string[] = []): Promise<TaskPage> {
    if (pageSize < 0) throw protocolError(ErrorCode.INVALID_PARAMS, "page_size must not be negative");
    const size = Math.min(pageSize === 0 ? DEFAULT_PAGE_SIZE : pageSize, MAX_PAGE_SIZE);
    const operator = typeof caller !== "string" && caller.operator === true;
    const requesterAgentId = operator ? undefined : typeof caller === "string" ? caller : caller.agentId;
    try {
      return await this.options.store.listTasks({ requesterAgentId, states, taskTypes, pageSize: size, pageToken: pageToken || undefined });
    } catch (error) {
      if (error instanceof RangeError) throw protocolError(ErrorCode.INVALID_PARAMS, error.message);
      throw error;
    }
  }

  /**
   * The task's current state first, then every event from `fromSequence`,
   * then new ones as they happen, with heartbeats when idle; ends after the
   * terminal event or when `signal` aborts. Events are always read from the
   * store (the bus only says when to look), so a resumed watch loses none.
   */
  async *watch(taskId: string, caller: TaskReaderCaller, fromSequence: number, signal: AbortSignal): AsyncGenerator<WatchItem> {
    const first = await this.getTask(taskId, caller);
    let changed = true;
    let wake: (() => void) | undefined;
    const unsubscribe = this.options.bus.subscribe(taskId, () => {
      changed = true;
      wake?.();
    });
    const onAbort = () => wake?.();
    signal.addEventListener("abort", onAbort);
    try {
      yield { kind: "snapshot", task: first };
      let next = Math.max(1, fromSequence);
      while (!signal.aborted) {
        changed = false;
        for (const event of await this.options.store.listEvents(taskId, next)) {
          yield { kind: "event", event };
          next = event.sequence + 1;
        }
        const task = await this.options.store.getTask(taskId);
        if (task === undefined || (isTerminal(task.state) && next > task.lastSequence)) return;
        if (changed) continue;
        const idle = await new Promise<boolean>((resolve) => {
          const timer = setTimeout(() => resolve(true), this.options.heartbeatIntervalMs);
          wake = () => {
            clearTimeout(timer);
            resolve(false);
          };
          if (changed || signal.aborted) wake();
        });
        wake = undefined;
        if (idle && !signal.aborted) yield { kind: "heartbeat", heartbeat: await this.options.heartbeat(first) };
      }
    } finally {
      unsubscribe();
      signal.removeEventListener("abort", onAbort);
    }
  }

  /** The task's result bytes from `offset`, in chunks; the last carries size and SHA-256. */
  async *readResult(taskId: string, caller: TaskReaderCaller, offset: number): AsyncGenerator<StreamChunk> {
    const task = await this.getTask(taskId, caller);
    const stream = task.resultStream;
    if (stream === undefined) {
      throw protocolError(ErrorCode.INVALID_PARAMS, isTerminal(task.state) ? `task ${clip(taskId)} has no result stream` : `task ${clip(taskId)} has not completed`, {
        status: Code.FailedPrecondition, // the request is fine; the task has no result to read
      });
    }
    if (offset > stream.totalSize) {
      throw protocolError(ErrorCode.INVALID_PARAMS, `offset ${offset} is past the end of the stream (${stream.totalSize} bytes)`, { status: Code.OutOfRange });
    }
    let position = offset;
    do {
      const data = await this.options.store.readResult(taskId, position, RESULT_CHUNK_BYTES);
      const last = position + data.byteLength >= stream.totalSize;
      yield create(StreamChunkSchema, {
        streamId: taskId,
        offset: BigInt(position),
        data,
        last,
        sha256: last ? stream.sha256 : undefined,
        totalSize: last ? BigInt(stream.totalSize) : 0n,
      });
      position += data.byteLength;
      if (last) return;
    } while (true);
  }
}
