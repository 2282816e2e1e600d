// Following a task's events on the terminal: one line per event, a progress
// bar when stdout is a terminal, or NDJSON with --json.
import { TaskState } from "../../gen/synapse/v1/payloads_pb.js";
import type { SynapseClient } from "../client/requester.js";
import { isTerminal } from "../protocol/state-machine.js";
import { describeEvent, messageJson, progressBar } from "./task-output.js";

export interface FollowOptions {
  fromSequence?: number;
  json?: boolean;
  /** Stop when the task waits for information or a decision. */
  untilInput?: boolean;
}

/** Prints events until the task ends; resolves with the last state seen (the snapshot's, when no event followed it). */
export async function follow(client: SynapseClient, taskId: string, options: FollowOptions = {}): Promise<TaskState | undefined> {
  const bar = !options.json && process.stdout.isTTY === true;
  let state: TaskState | undefined;
  let snapshot: TaskState | undefined;
  let progress = 0;
  for await (const item of client.watch(taskId, { fromSequence: options.fromSequence })) {
    if (item.kind === "snapshot") {
      snapshot = item.task.state;
      continue;
    }
    if (options.json) {
      const line =
        item.kind === "event"
          ? { kind: "event", sequence: item.sequence, state: TaskState[item.state], ...(messageJson(item.event) as object) }
          : item.kind === "heartbeat"
            ? { kind: "heartbeat", ...(messageJson(item.heartbeat) as object) }
            : { kind: "reconnecting", attempt: item.attempt, fromSequence: item.fromSequence, error: item.error.message };
      process.stdout.write(`${JSON.stringify(line)}\n`);
    } else if (item.kind === "event") {
      const payload = item.event.payload as { progress?: number; message?: string };
      if (typeof payload.progress === "number") progress = payload.progress;
      // task_complete carries no progress of its own: a completed task is done.
      if (item.state === TaskState.COMPLETED) progress = 100;
      if (bar) process.stdout.write(progressBar(progress, describeEvent(item.sequence, item.event, item.state).slice(0, 50)));
      else process.stdout.write(`${describeEvent(item.sequence, item.event, item.state)}\n`);
    } else if (item.kind === "reconnecting") {
      process.stderr.write(`connection lost (${item.error.message}); resuming from event ${item.fromSequence}\n`);
    }
    if (item.kind === "event") {
      state = item.state;
      if (isTerminal(state) || (options.untilInput && (state === TaskState.INFO_NEEDED || state === TaskState.NEED_HUMAN))) break;
    }
  }
  if (bar) process.stdout.write("\n");
  return state ?? snapshot;
}
