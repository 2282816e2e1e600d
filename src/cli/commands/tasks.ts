// `synapse tasks URL`: your tasks at an agent, newest first.
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
  for (const task of page.tasks) {
    printLine(`${task.taskId}  ${task.taskType.padEnd(16)}${stateName(task.state).padEnd(16)}${String(task.progress).padStart(3)}%  ${task.statusMessage}`);
  }
  if (page.nextPageToken) printLine(`more: --page-token ${page.nextPageToken}`);
  return 0;
}
