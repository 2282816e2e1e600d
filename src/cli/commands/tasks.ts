// `synapse tasks URL`: your tasks at an agent, newest first.
import type { Task } from "../../../gen/synapse/v1/p2p_pb.js";
import { TaskState } from "../../../gen/synapse/v1/payloads_pb.js";
import { integerOption, parse, requirePositional, UsageError } from "../args.js";
import { clientOptions, openClient } from "../client.js";
import { printJson, printLine } from "../output.js";
import { taskJson } from "../task-output.js";
import { stateName } from "../../protocol/state-machine.js";

export const tasksUsage = `usage: synapse tasks URL [--state STATE ...] [--type TASK_TYPE ...] [--page-size N] [--page-token T] [--home DIR] [--protocol P] [--json]

Lists your tasks (ListTasks), newest first (every requester's when your key is
one of the agent's --operator keys). STATE is a task state such as completed,
failed or info_needed; repeat --state for several, --type for several task
types. Pass the same filters with --page-token.`;

function parseState(name: string): TaskState {
  const key = name.trim().toUpperCase().replace(/^TASK_STATE_/, "") as keyof typeof TaskState;
  const state = TaskState[key];
  if (typeof state !== "number" || state === TaskState.UNSPECIFIED) throw new UsageError(`unknown task state ${JSON.stringify(name)}`);
  return state;
}

/** One line per task, each column as wide as its widest cell, so ids of any length line up. */
export function taskTable(list: readonly Task[]): string[] {
  const rows = list.map((task) => [task.taskId, task.taskType, stateName(task.state), `${task.progress}%`, task.statusMessage]);
  const widths = [0, 1, 2, 3].map((column) => Math.max(...rows.map((row) => row[column]!.length)));
  return rows.map((row) =>
    [row[0]!.padEnd(widths[0]!), row[1]!.padEnd(widths[1]!), row[2]!.padEnd(widths[2]!), row[3]!.padStart(widths[3]!), row[4]!].join("  ").trimEnd(),
  );
}

export async function tasks(argv: string[]): Promise<number> {
  const { values, positionals } = parse(
    argv,
    { ...clientOptions, state: { type: "string", multiple: true }, type: { type: "string", multiple: true }, "page-size": { type: "string" }, "page-token": { type: "string" } },
    tasksUsage,
  );
  if (values.help) {
    printLine(tasksUsage);
    return 0;
  }
  const url = requirePositional(positionals, 0, "URL", tasksUsage);
  const client = await openClient(url, values);
  const page = await client.listTasks({
    states: (values.state ?? []).map(parseState),
    taskTypes: values.type ?? [],
    pageSize: integerOption(values["page-size"], "--page-size"),
    pageToken: values["page-token"],
  });
  if (values.json) {
    printJson({ tasks: page.tasks.map(taskJson), nextPageToken: page.nextPageToken });
    return 0;
  }
  for (const line of taskTable(page.tasks)) printLine(line);
  if (page.nextPageToken) printLine(`more: --page-token ${page.nextPageToken}`);
  return 0;
}
