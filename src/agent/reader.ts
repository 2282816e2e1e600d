// The read side of the executor: a requester's tasks by id or page, a task's
// event log as a live stream that resumes from any sequence, and result
// streams that resume from any offset. A requester sees only its own tasks
// (and an escalation contact the tasks it was asked to decide); an operator
// (a caller whose key is one of the agent's operator keys) sees every task,
// read-only: reading is all this module does.
import { create } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import { StreamChunkSchema, type StreamChunk } from "../../gen/synapse/v1/p2p_pb.js";
import type { TaskState } from "../../gen/synapse/v1/payloads_pb.js";
import { clip, protocolError, taskNotFound } from "../protocol/errors.js";
import { isTerminal } from "../protocol/state-machine.js";
import type { PartyRecord, StoredEvent, StoredReply, TaskPage, TaskRecord, TaskStore } from "../store/store.js";
import { onAbort, type Abortable } from "../abort.js";
import { TaskAccess } from "./access.js";
import type { TaskEventBus } from "./events.js";
import type { AgentObserver } from "../observability/agent-observer.js";

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
  /** A signed heartbeat addressed to the watcher (the requester, or an escalation contact), carrying the watched task's ids. */
  heartbeat: (receiver: PartyRecord, task: TaskRecord) => Promise<StoredReply>;
  /** Told when a watch (a Watch call or an SSE event stream) starts and ends. */
  observer?: Pick<AgentObserver, "watchOpened" | "watchClosed">;
}

/**
 * Who reads: an agent id (a requester, or an escalation contact), or an
 * authenticated caller that may be an operator (who sees every task).
 */
export type TaskReaderCaller = string | { readonly agentId: string; readonly operator?: boolean };

const agentIdOf = (caller: TaskReaderCaller): string => (typeof caller === "string" ? caller : caller.agentId);
const isOperator = (caller: TaskReaderCaller): boolean => typeof caller !== "string" && caller.operator === true;

/** The tasks a ListTasks page holds for a requested page_size (0: the default). */
export function taskPageSize(requested: number): number {
  if (requested < 0) throw protocolError(ErrorCode.INVALID_PARAMS, "page_size must not be negative");
  return Math.min(requested === 0 ? DEFAULT_PAGE_SIZE : requested, MAX_PAGE_SIZE);
}

export class TaskReader {
  private readonly access: TaskAccess;

  constructor(private readonly options: ReaderOptions) {
    this.access = new TaskAccess(options.store);
  }

  async getTask(taskId: string, caller: TaskReaderCaller): Promise<TaskRecord> {
    const task = await this.options.store.getTask(taskId);
    // Another requester's task is reported as absent, not as forbidden: ids are not secrets, but existence is.
    if (task === undefined || !(isOperator(caller) || (await this.access.mayRead(task, agentIdOf(caller))))) throw taskNotFound(taskId);
    return task;
  }

  async listTasks(caller: TaskReaderCaller, pageSize: number, pageToken: string, states: readonly TaskState[], taskTypes: readonly string[] = []): Promise<TaskPage> {
    const size = taskPageSize(pageSize);
    try {
      const requesterAgentId = isOperator(caller) ? undefined : agentIdOf(caller);
      return await this.options.store.listTasks({ requesterAgentId, states, taskTypes, pageSize: size, pageToken: pageToken || undefined });
    } catch (error) {
      if (error instanceof RangeError) throw protocolError(ErrorCode.INVALID_PARAMS, error.message);
      throw error;
    }
  }

  /**
   * The task's current state first, then every event from `fromSequence`,
   * then new ones as they happen, with heartbeats when idle; ends after the
   * terminal event or when `stop` aborts (any of them, when several: a call's
   * signal and the server's draining, say, without a signal linking them per
   * watch). Events this process commits
   * come from the bus as they are committed, the same objects (and so the
   * same encoded bytes) for every watcher; anything else (a resume, a gap,
   * another instance's commit) is read from the store, so none is lost.
   */
  async *watch(
    taskId: string,
    caller: TaskReaderCaller,
    fromSequence: number,
    stop: AbortSignal | Abortable | ReadonlyArray<AbortSignal | Abortable>,
    options: { heartbeats?: boolean } = {},
  ): AsyncGenerator<WatchItem> {
    const signals: ReadonlyArray<AbortSignal | Abortable> = Array.isArray(stop) ? stop : [stop as AbortSignal | Abortable];
    const stopped = () => signals.some((signal) => signal.aborted);
    const callerAgentId = agentIdOf(caller);
    const heard: StoredEvent[] = []; // handed over by the bus since the last look
    let latest: TaskRecord | undefined; // the task as of the last event heard
    let unheard = false; // something changed that the bus did not hand over: read the store
    let wake: (() => void) | undefined;
    // Listening before the task is read: what is committed from now on comes from the bus, what was before shows in the task read.
    const unsubscribe = this.options.bus.subscribe(taskId, (change) => {
      if (change.event !== undefined && change.task !== undefined) {
        heard.push(change.event);
        latest = change.task;
      } else unheard = true;
      wake?.();
    });
    let first: TaskRecord;
    try {
      first = await this.getTask(taskId, caller);
    } catch (error) {
      unsubscribe();
      throw error;
    }
    const stopListening = signals.map((signal) => onAbort(signal, () => wake?.()));
    this.options.observer?.watchOpened();
    try {
      yield { kind: "snapshot", task: first };
      let next = Math.max(1, fromSequence);
      // Events the task had when it was read are in the store; a watch that starts after them has nothing to read there.
      if (next <= first.lastSequence) unheard = true;
      let task: TaskRecord | undefined = first;
      while (!stopped()) {
        if (unheard) {
          unheard = false;
          heard.length = 0;
          for (const event of await this.options.store.listEvents(taskId, next)) {
            yield { kind: "event", event };
            next = event.sequence + 1;
          }
          task = await this.options.store.getTask(taskId);
        } else if (heard.length > 0) {
          const known = latest;
          for (const event of heard.splice(0)) {
            if (event.sequence < next) continue; // read from the store already
            if (event.sequence > next) {
              unheard = true; // a gap: the store has the missing ones
              break;
            }
            yield { kind: "event", event };
            next = event.sequence + 1;
          }
          if (unheard) continue;
          task = known;
        }
        if (task === undefined || (isTerminal(task.state) && next > task.lastSequence)) {
          // The last event reaches every other watcher of the task before this stream ends.
          await this.options.bus.settled(taskId);
          return;
        }
        if (unheard || heard.length > 0) continue;
        const idle = await new Promise<boolean>((resolve) => {
          const timer = setTimeout(() => resolve(true), this.options.heartbeatIntervalMs);
          wake = () => {
            clearTimeout(timer);
            resolve(false);
          };
          if (unheard || heard.length > 0 || stopped()) wake();
        });
        wake = undefined;
        if (idle && !stopped() && options.heartbeats !== false) {
          const receiver = first.requester.agentId === callerAgentId ? first.requester : { agentId: callerAgentId, systemId: "", keyId: "" };
          yield { kind: "heartbeat", heartbeat: await this.options.heartbeat(receiver, first) };
        }
      }
    } finally {
      unsubscribe();
      for (const stopListeningTo of stopListening) stopListeningTo();
      this.options.observer?.watchClosed();
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
