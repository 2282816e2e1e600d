// Who may see a task: its requester, and the escalation contacts a
// task_need_human of it named (from that event on; before it the task does
// not exist for them, as for anyone else). The signed events are the
// record of who was named, so this holds across restarts and instances.
import { MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import type { TaskNeedHumanPayload } from "../../gen/synapse/v1/payloads_pb.js";
import type { TaskRecord, TaskStore } from "../store/store.js";

export class TaskAccess {
  constructor(private readonly store: TaskStore) {}

  /** Whether `agentId` may read the task (GetTask, Watch, the SSE stream, ReadResult). */
  async mayRead(task: TaskRecord, agentId: string): Promise<boolean> {
    if (task.requester.agentId === agentId) return true;
    if (task.pendingDecision?.deciders.includes(agentId)) return true;
    // Named at an earlier level, or the decision is over: the log says.
    for (const event of await this.store.listEvents(task.taskId, 1)) {
      if (event.header.messageType === MessageType.TASK_NEED_HUMAN && (event.payload as TaskNeedHumanPayload).deciders.includes(agentId)) return true;
    }
    return false;
  }
}
