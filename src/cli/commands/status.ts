// `synapse status URL TASK`: a task's state, pending question and result.
import { parse, requirePositional } from "../args.js";
import { a2aOptions, A2A_USAGE, openTarget, statusA2A } from "../a2a.js";
import { clientOptions } from "../client.js";
import { printJson, printLine } from "../output.js";
import { describeTask, taskJson } from "../task-output.js";
import { exitCodeFor } from "./submit.js";

export const statusUsage = `usage: synapse status URL TASK_ID [--home DIR] [--protocol P] [--json] [--a2a] [--binding B] [--token T]

Polls one of your tasks (GetTask, with a bearer token made from your key).
Exit status: 0 when the task completed or is still under way, 1 when it failed,
was rejected or cancelled, 3 when it waits for information or a decision.

${A2A_USAGE} An A2A task is shown as a Synapse task (input-required as
info_needed, artifacts as the result), its A2A form under "a2a" with --json.`;

export async function status(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...clientOptions, ...a2aOptions }, statusUsage);
  if (values.help) {
    printLine(statusUsage);
    return 0;
  }
  const url = requirePositional(positionals, 0, "URL", statusUsage);
  const taskId = requirePositional(positionals, 1, "TASK_ID", statusUsage);
  const target = await openTarget(url, values);
  if (target.kind === "a2a") return statusA2A(target.client, taskId, values.json);
  const task = await target.client.getTask(taskId);
  if (values.json) printJson(taskJson(task));
  else for (const line of describeTask(task, { url, agentId: target.client.agentId })) printLine(line);
  return exitCodeFor(task.state);
}
