// The tasks the console knows, by id, kept current from what the agent
// sends: pages of ListTasks, Watch snapshots, Send replies, and each
// verified event of a watched task applied as the agent applied it (the
// state through the state machine, progress, the open question, the
// outcome). Views subscribe and redraw what changed. A confidential task's
// view carries no content (docs/PROTOCOL.md §9.4): what it asks and what it
// gave back are taken from its events opened in this browser.
import { clone, type Message } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { MessageType, type Header } from "../../gen/synapse/v1/envelope_pb.js";
import { TaskSchema, type Task } from "../../gen/synapse/v1/p2p_pb.js";
import {
  TaskState,
  type TaskAckPayload,
  type TaskCompletePayload,
  type TaskFailedPayload,
  type TaskNeedHumanPayload,
  type TaskNeedInfoPayload,
  type TaskRejectPayload,
  type TaskStatusUpdatePayload,
} from "../../gen/synapse/v1/payloads_pb.js";
import { stateAfterEvent } from "../protocol/event-state.js";

export type TaskListener = (task: Task) => void;

const updatedMs = (task: Task) => (task.updatedAt ? timestampMs(task.updatedAt) : 0);

/** A confidential task's view with what its opened events say, up to the view's last sequence. */
function withOpenedContent(task: Task, opened: ReadonlyMap<bigint, { type: MessageType; payload: Message }> | undefined): Task {
  if (opened === undefined || opened.size === 0) return task;
  const view = clone(TaskSchema, task);
  for (const [sequence, { type, payload }] of [...opened].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    if (sequence > view.lastSequence) break;
    switch (type) {
      case MessageType.TASK_STATUS_UPDATE:
        view.statusMessage = (payload as TaskStatusUpdatePayload).message;
        break;
      case MessageType.TASK_NEED_INFO:
        view.pendingInfo = payload as TaskNeedInfoPayload;
        break;
      case MessageType.TASK_NEED_HUMAN:
        view.pendingDecision = payload as TaskNeedHumanPayload;
        break;
      case MessageType.TASK_COMPLETE: {
        const complete = payload as TaskCompletePayload;
        view.result = complete.result;
        view.statusMessage = complete.summary;
        break;
      }
      case MessageType.TASK_FAILED:
        view.error = (payload as TaskFailedPayload).error;
        break;
      case MessageType.TASK_REJECT:
        view.rejection = payload as TaskRejectPayload;
        break;
    }
  }
  // What is pending is what the current state waits for.
  if (view.state !== TaskState.INFO_NEEDED) view.pendingInfo = undefined;
  if (view.state !== TaskState.NEED_HUMAN && view.state !== TaskState.HUMAN_DECIDING) view.pendingDecision = undefined;
  return view;
}

export class TaskModel {
  private readonly tasks = new Map<string, Task>();
  private readonly listeners = new Set<TaskListener>();
  /** The opened events of confidential tasks, by sequence. */
  private readonly opened = new Map<string, Map<bigint, { type: MessageType; payload: Message }>>();

  get(taskId: string): Task | undefined {
    return this.tasks.get(taskId);
  }

  subscribe(listener: TaskListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private set(task: Task): void {
    this.tasks.set(task.taskId, task);
    for (const listener of this.listeners) listener(task);
  }

  /** A task as the agent showed it; kept unless what is held is newer (a later event was applied). */
  upsert(task: Task): void {
    const held = this.tasks.get(task.taskId);
    if (held !== undefined && (held.lastSequence > task.lastSequence || (held.lastSequence === task.lastSequence && updatedMs(held) > updatedMs(task)))) return;
    // A reply may leave the request out; keep the one held.
    if (task.request === undefined && held?.request !== undefined) task = { ...task, request: held.request };
    if (task.confidential !== undefined) task = withOpenedContent(task, this.opened.get(task.taskId));
    this.set(task);
  }

  /** Applies a verified event at `sequence` to the held task (ignored when it is not the next one). */
  applyEvent(taskId: string, sequence: bigint, header: Header, type: MessageType, payload: Message): void {
    const held = this.tasks.get(taskId);
    if (held?.confidential !== undefined) {
      // The view shows the state without the content: an event it already counts still brings what it says.
      let opened = this.opened.get(taskId);
      if (opened === undefined) this.opened.set(taskId, (opened = new Map()));
      opened.set(sequence, { type, payload });
      if (sequence <= held.lastSequence) {
        this.set(withOpenedContent(held, opened));
        return;
      }
    }
    if (held === undefined || sequence !== held.lastSequence + 1n) return;
    const task = clone(TaskSchema, held);
    const next = stateAfterEvent(task.state, type, payload);
    if (next === undefined) return; // not a step the machine allows: leave the task as the agent last showed it
    task.state = next;
    task.lastSequence = sequence;
    if (header.sentAt) task.updatedAt = header.sentAt;
    switch (type) {
      case MessageType.TASK_STATUS_UPDATE: {
        const update = payload as TaskStatusUpdatePayload;
        task.progress = update.progress;
        task.statusMessage = update.message;
        break;
      }
      case MessageType.TASK_NEED_INFO:
        task.pendingInfo = payload as TaskNeedInfoPayload;
        break;
      case MessageType.TASK_NEED_HUMAN:
        task.pendingDecision = payload as TaskNeedHumanPayload;
        break;
      case MessageType.TASK_ACK: {
        const ack = payload as TaskAckPayload;
        if (ack.acknowledgedType === MessageType.TASK_INFO_PROVIDED) task.pendingInfo = undefined;
        if (ack.acknowledgedType === MessageType.HUMAN_DECISION) task.pendingDecision = undefined;
        if (ack.message) task.statusMessage = ack.message;
        break;
      }
      case MessageType.TASK_COMPLETE: {
        const complete = payload as TaskCompletePayload;
        task.result = complete.result;
        task.progress = 100;
        task.statusMessage = complete.summary;
        break;
      }
      case MessageType.TASK_FAILED:
        task.error = (payload as TaskFailedPayload).error;
        break;
      case MessageType.TASK_REJECT:
        task.rejection = payload as TaskRejectPayload;
        break;
    }
    if (next !== TaskState.INFO_NEEDED) task.pendingInfo = undefined;
    if (next !== TaskState.NEED_HUMAN && next !== TaskState.HUMAN_DECIDING) task.pendingDecision = undefined;
    this.set(task);
  }
}
