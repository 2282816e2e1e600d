// `synapse watch URL TASK [--from N]`: follows a task's signed events.
import { a2aOptions, A2A_USAGE, openTarget, watchA2A } from "../a2a.js";
import { integerOption, parse, requirePositional, UsageError } from "../args.js";
import { clientOptions } from "../client.js";
import { follow } from "../follow.js";
import { printLine } from "../output.js";
import { exitCodeFor } from "./submit.js";

export const watchUsage = `usage: synapse watch URL TASK_ID [--from SEQUENCE] [--home DIR] [--protocol P] [--json] [--a2a] [--binding B] [--token T]

Prints every event of the task from SEQUENCE (default 1), each verified against
the executor's key, until the task ends; resumes by itself after a dropped
connection. --json prints one JSON object per line (NDJSON).

${A2A_USAGE} An A2A task's events come by SubscribeToTask (resubscribed after a
dropped connection), numbered as they arrive; they are not signed.`;

export async function watch(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...clientOptions, ...a2aOptions, from: { type: "string" } }, watchUsage);
  if (values.help) {
    printLine(watchUsage);
    return 0;
  }
  const url = requirePositional(positionals, 0, "URL", watchUsage);
  const taskId = requirePositional(positionals, 1, "TASK_ID", watchUsage);
  const fromSequence = integerOption(values.from, "--from");
  const target = await openTarget(url, values);
  if (target.kind === "a2a") {
    if (fromSequence !== undefined) throw new UsageError("--from: an A2A agent's events have no sequence numbers");
    return exitCodeFor(await watchA2A(target.client, taskId, values.json));
  }
  return exitCodeFor(await follow(target.client, taskId, { fromSequence, json: values.json }));
}
