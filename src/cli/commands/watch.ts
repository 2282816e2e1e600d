// `synapse watch URL TASK [--from N]`: follows a task's signed events.
import { integerOption, parse, requirePositional } from "../args.js";
import { clientOptions, openClient } from "../client.js";
import { follow } from "../follow.js";
import { printLine } from "../output.js";
import { exitCodeFor } from "./submit.js";

export const watchUsage = `usage: synapse watch URL TASK_ID [--from SEQUENCE] [--home DIR] [--protocol P] [--json]

Prints every event of the task from SEQUENCE (default 1), each verified against
the executor's key, until the task ends; resumes by itself after a dropped
connection. --json prints one JSON object per line (NDJSON).`;

export async function watch(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...clientOptions, from: { type: "string" } }, watchUsage);
  if (values.help) {
    printLine(watchUsage);
    return 0;
  }
  const url = requirePositional(positionals, 0, "URL", watchUsage);
  const taskId = requirePositional(positionals, 1, "TASK_ID", watchUsage);
  const client = await openClient(url, values);
  return exitCodeFor(await follow(client, taskId, { fromSequence: integerOption(values.from, "--from"), json: values.json }));
}
