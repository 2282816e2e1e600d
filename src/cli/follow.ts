// Following a task's events on the terminal: one line per event, a progress
// bar when stdout is a terminal, or NDJSON with --json. The events come from
// a Synapse Watch (signed) or an A2A stream (see a2a.ts), as FollowItems.
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

/** What a followed stream shows: the task's state first, its events, keep-alives and reconnects. */
export type FollowItem =
  | { kind: "snapshot"; state: TaskState }
  /** `line` for the terminal, `json` the fields of its NDJSON line besides kind, sequence and state. */
  | { kind: "event"; sequence: number; state: TaskState; progress?: number; line: string; json: object }
  | { kind: "heartbeat"; json: object }
  | { kind: "reconnecting"; attempt: number; fromSequence: number; error: Error };

/** A Synapse Watch as FollowItems. */
async function* watchItems(client: SynapseClient, taskId: string, fromSequence: number | undefined): AsyncGenerator<FollowItem> {
  for await (const item of client.watch(taskId, { fromSequence })) {
    if (item.kind === "snapshot") yield { kind: "snapshot", state: item.task.state };
    else if (item.kind === "event") {
      const payload = item.event.payload as { progress?: number };
      yield { kind: "event", sequence: item.sequence, state: item.state, progress: payload.progress, line: describeEvent(item.sequence, item.event, item.state), json: messageJson(item.event) as object };
    } else if (item.kind === "heartbeat") yield { kind: "heartbeat", json: messageJson(item.heartbeat) as object };
    else yield item;
  }
}

/** Prints a Synapse task's events until it ends; resolves with the last state seen (the snapshot's, when no event followed it). */
export function follow(client: SynapseClient, taskId: string, options: FollowOptions = {}): Promise<TaskState | undefined> {
  return followItems(watchItems(client, taskId, options.fromSequence), options);
}

/** Prints followed items until the task ends (or waits, with untilInput); resolves with the last state seen. */
export async function followItems(items: AsyncIterable<FollowItem>, options: FollowOptions = {}): Promise<TaskState | undefined> {
  const bar = !options.json && process.stdout.isTTY === true;
  let state: TaskState | undefined;
  let snapshot: TaskState | undefined;
  let progress = 0;
  for await (const item of items) {
    if (item.kind === "snapshot") {
      snapshot = item.state;
      continue;
    }
    if (options.json) {
      const line =
        item.kind === "event"
          ? { kind: "event", sequence: item.sequence, state: TaskState[item.state], ...item.json }
          : item.kind === "heartbeat"
            ? { kind: "heartbeat", ...item.json }
            : { kind: "reconnecting", attempt: item.attempt, fromSequence: item.fromSequence, error: item.error.message };
      process.stdout.write(`${JSON.stringify(line)}\n`);
    } else if (item.kind === "event") {
      if (typeof item.progress === "number") progress = item.progress;
      // task_complete carries no progress of its own: a completed task is done.
      if (item.state === TaskState.COMPLETED) progress = 100;
      if (bar) process.stdout.write(progressBar(progress, item.line.slice(0, 50)));
      else process.stdout.write(`${item.line}\n`);
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
