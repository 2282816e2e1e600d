// The polling view of a task (synapse.v1.Task) built from its record.
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { TaskSchema, type Task } from "../../gen/synapse/v1/p2p_pb.js";
import type { TaskRecord } from "../store/store.js";

/** The task as GetTask, ListTasks and Watch show it; `withRequest: false` leaves out the request (Send: the sender has it). */
export function taskView(record: TaskRecord, options: { withRequest?: boolean } = {}): Task {
  // A confidential task's content is read from its sealed events by its parties; the view shows the rest.
  if (record.confidential !== undefined) {
    return create(TaskSchema, {
      taskId: record.taskId,
      taskType: record.taskType,
      state: record.state,
      progress: record.progress,
      requester: record.requester,
      executor: record.executor,
      createdAt: timestampFromMs(record.createdAtMs),
      updatedAt: timestampFromMs(record.updatedAtMs),
      lastSequence: BigInt(record.lastSequence),
      confidential: record.confidential,
    });
  }
  return create(TaskSchema, {
    taskId: record.taskId,
    taskType: record.taskType,
    state: record.state,
    progress: record.progress,
    statusMessage: record.statusMessage,
    requester: record.requester,
    executor: record.executor,
    createdAt: timestampFromMs(record.createdAtMs),
    updatedAt: timestampFromMs(record.updatedAtMs),
    lastSequence: BigInt(record.lastSequence),
    pendingInfo: record.pendingInfo,
    pendingDecision: record.pendingDecision,
    result: record.result,
    error: record.error,
    rejection: record.rejection,
    request: options.withRequest === false ? undefined : record.request,
  });
}
