// A2A streams from a task's event log: first the Task, then a
// TaskStatusUpdateEvent for each change of A2A state (and each question),
// a TaskArtifactUpdateEvent with the result before the completed status;
// the stream ends when the task ends or waits for the client. Events come
// from the reader's Watch, so events another instance commits count too.
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import {
  StreamResponseSchema,
  TaskArtifactUpdateEventSchema,
  TaskStatusUpdateEventSchema,
  TaskStatusSchema,
  type Message,
  type StreamResponse,
} from "../../gen/lf/a2a/v1/a2a_pb.js";
import { MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import { TaskState, type TaskFailedPayload, type TaskNeedHumanPayload, type TaskNeedInfoPayload, type TaskRejectPayload } from "../../gen/synapse/v1/payloads_pb.js";
import type { Agent } from "../agent/agent.js";
import type { Abortable } from "../abort.js";
import { stateAfterEvent } from "../protocol/event-state.js";
import type { StoredEvent, TaskRecord } from "../store/store.js";
import type { A2ACaller } from "./auth.js";
import { agentMessage, dataPart, needHumanMessage, needInfoMessage, resultArtifacts, textPart, type ConvertContext } from "./convert.js";
import { loadTask } from "./read.js";
import { readerOf } from "./send.js";
import { a2aState, endsStream, isA2ATerminal } from "./states.js";
import { a2aError } from "./errors.js";
import { inA2ATerms } from "./synapse-errors.js";

/** The agent's message an event carries for the status it leads to, if any. */
function eventMessage(task: TaskRecord, event: StoredEvent, context: ConvertContext): Message | undefined {
  if (event.header.confidential !== undefined) return undefined; // its content is for its Synapse parties only
  const id = `${task.taskId}-${event.sequence}`;
  const agentText = (value: string, extra?: Parameters<typeof dataPart>[0]) => agentMessage(task, id, extra === undefined ? [textPart(value)] : [textPart(value), dataPart(extra)]);
  switch (event.header.messageType) {
    case MessageType.TASK_NEED_INFO:
      return needInfoMessage(task, event.payload as TaskNeedInfoPayload, id, context);
    case MessageType.TASK_NEED_HUMAN:
      return needHumanMessage(task, event.payload as TaskNeedHumanPayload, id);
    case MessageType.TASK_FAILED: {
      const error = (event.payload as TaskFailedPayload).error;
      return agentText(error?.message || "failed", { kind: "error", code: error?.code ?? 0, message: error?.message ?? "" });
    }
    case MessageType.TASK_REJECT:
      return agentText((event.payload as TaskRejectPayload).reason?.message || "rejected");
    default:
      return undefined;
  }
}

export interface FollowOptions {
  agent: Agent;
  convert: ConvertContext;
  caller: A2ACaller;
  stop: ReadonlyArray<AbortSignal | Abortable>;
}

/** What one event shows an A2A client: the state after it, and the updates (none when the A2A state and message stay). */
export interface EventUpdates {
  state: TaskState;
  updates: StreamResponse[];
}

/**
 * The updates an event of `task` makes, from the Synapse state before it:
 * a status update when the A2A state changes or the agent says something,
 * preceded by the result artifact when the task completes.
 */
export async function eventUpdates(agent: Agent, convert: ConvertContext, task: TaskRecord, event: StoredEvent, before: TaskState): Promise<EventUpdates> {
  const state = stateAfterEvent(before, event.header.messageType, event.payload) ?? before;
  const next = a2aState(state);
  const message = eventMessage(task, event, convert);
  if (next === a2aState(before) && message === undefined) return { state, updates: [] };
  const contextId = task.carried?.sessionId ?? "";
  const updates: StreamResponse[] = [];
  if (state === TaskState.COMPLETED) {
    const current = (await agent.store.getTask(task.taskId)) ?? task;
    const loaded = (await loadTask(agent, convert, current, { historyLength: 0 })).artifacts;
    for (const artifact of loaded.length > 0 || current.confidential !== undefined ? loaded : resultArtifacts(current)) {
      updates.push(create(StreamResponseSchema, { payload: { case: "artifactUpdate", value: create(TaskArtifactUpdateEventSchema, { taskId: task.taskId, contextId, artifact, append: false, lastChunk: true }) } }));
    }
  }
  const sentAt = event.header.sentAt;
  const timestamp = timestampFromMs(sentAt ? Number(sentAt.seconds) * 1000 + Math.floor(sentAt.nanos / 1e6) : Date.now());
  const status = create(TaskStatusSchema, { state: next, message, timestamp });
  updates.push(create(StreamResponseSchema, { payload: { case: "statusUpdate", value: create(TaskStatusUpdateEventSchema, { taskId: task.taskId, contextId, status }) } }));
  return { state, updates };
}

/**
 * The stream for a task read as `first`: the Task (with history), then its
 * updates from the event after `first`'s last, until it ends or waits.
 */
export async function* followTask(options: FollowOptions, first: TaskRecord, historyLength?: number): AsyncGenerator<StreamResponse> {
  const { agent, convert } = options;
  yield create(StreamResponseSchema, { payload: { case: "task", value: await loadTask(agent, convert, first, { historyLength }) } });
  let state = first.state;
  if (endsStream(a2aState(state))) return;
  for await (const item of agent.reader.watch(first.taskId, readerOf(options.caller), first.lastSequence + 1, options.stop, { heartbeats: false })) {
    if (item.kind !== "event") continue;
    const step = await eventUpdates(agent, convert, first, item.event, state);
    state = step.state;
    yield* step.updates;
    if (step.updates.length > 0 && endsStream(a2aState(state))) return;
  }
}

/** SubscribeToTask: the caller's task followed from now; a task that ended has nothing to follow. */
export async function* subscribe(options: FollowOptions, taskId: string): AsyncGenerator<StreamResponse> {
  const task = await inA2ATerms(() => options.agent.reader.getTask(taskId, readerOf(options.caller)));
  const state = a2aState(task.state);
  if (isA2ATerminal(state)) {
    throw a2aError("UnsupportedOperation", `task ${taskId} has ended (${TaskState[task.state].toLowerCase()}): there is nothing to subscribe to`, { metadata: { taskId } });
  }
  yield* followTask(options, task);
}
