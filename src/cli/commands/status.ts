// `synapse status URL TASK`: a task's state, pending question and result.
import { parse, requirePositional } from "../args.js";
import { clientOptions, openClient } from "../client.js";
import { printJson, printLine } from "../output.js";
import { describeTask, taskJson } from "../task-output.js";
import { exitCodeFor } from "./submit.js";

export const statusUsage = `usage: synapse status URL TASK_ID [--home DIR] [--protocol P] [--json]

Polls one of your tasks (GetTask, with a bearer token made from your key).
Exit status: 0 when the task completed or is still under way, 1 when it failed,
was rejected or cancelled, 3 when it waits for information or a decision.`;

export async function status(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, clientOptions, statusUsage);
  if (values.help) {
    printLine(statusUsage);
    return 0;
  }
  const url = requirePositional(positionals, 0, "URL", statusUsage);
  const taskId = requirePositional(positionals, 1, "TASK_ID", statusUsage);
  const client = await openClient(url, values);
  const task = await client.getTask(taskId);
  if (values.json) printJson(taskJson(task));
  else for (const line of describeTask(task, { url, agentId: client.agentId })) printLine(line);
  return exitCodeFor(task.state);
}
