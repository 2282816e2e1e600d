// `synapse submit URL --type T --payload JSON [--wait | --watch]`
import type { JsonObject } from "@bufbuild/protobuf";
import { TaskState } from "../../../gen/synapse/v1/payloads_pb.js";
import { isTerminal } from "../../protocol/state-machine.js";
import { integerOption, parse, requirePositional, UsageError } from "../args.js";
import { clientOptions, openClient, parseUploads } from "../client.js";
import { follow } from "../follow.js";
import { printJson, printLine } from "../output.js";
import { describeTask, messageJson, taskJson } from "../task-output.js";

export const submitUsage = `usage: synapse submit URL --type TASK_TYPE --payload JSON [--wait [--timeout SECONDS] | --watch]
                      [--upload NAME=SHA256:SIZE]... [--task-id ID] [--idempotency-key KEY] [--home DIR] [--protocol P] [--json]

Sends a signed p2p:task_request. --wait holds the reply until the task ends or
needs information or a decision (default timeout 300 s); --watch follows its
events. --upload names a file uploaded before for the handler, under NAME
(data_analysis reads one named csv): \`synapse upload URL FILE --name NAME\`
prints NAME=SHA256:SIZE as it goes here. Exit status: 0 when the task completed
or is still under way, 1 when it failed, was rejected or cancelled (or the
request was refused), 3 when it waits for information or a decision.`;

/** States in which a task waits for its requester: information or a human decision. */
const WAITING_FOR_YOU = new Set([TaskState.INFO_NEEDED, TaskState.NEED_HUMAN, TaskState.HUMAN_DECIDING]);

/**
 * The exit status of a command that shows a task, by the state it shows:
 * 0 completed or still under way, 1 failed, rejected or cancelled (a human's
 * rejection included: the task fails next), 3 waiting for its requester.
 * (`cancel` is the one exception: a task it cancelled is what was asked for, 0.)
 */
export function exitCodeFor(state: TaskState | undefined): number {
  if (state === undefined) return 0;
  if (WAITING_FOR_YOU.has(state)) return 3;
  if (state === TaskState.HUMAN_REJECTED) return 1;
  if (!isTerminal(state)) return 0;
  return state === TaskState.COMPLETED ? 0 : 1;
}

export async function submit(argv: string[]): Promise<number> {
  const { values, positionals } = parse(
    argv,
    {
      ...clientOptions,
      type: { type: "string" },
      payload: { type: "string" },
      wait: { type: "boolean" },
      watch: { type: "boolean" },
      timeout: { type: "string" },
      "task-id": { type: "string" },
      "idempotency-key": { type: "string" },
      upload: { type: "string", multiple: true },
    },
    submitUsage,
  );
  if (values.help) {
    printLine(submitUsage);
    return 0;
  }
  const url = requirePositional(positionals, 0, "URL", submitUsage);
  if (!values.type) throw new UsageError(`--type is required\n\n${submitUsage}`);
  if (values.wait && values.watch) throw new UsageError(`--wait and --watch go one at a time\n\n${submitUsage}`);
  let payload: JsonObject;
  try {
    payload = JSON.parse(values.payload ?? "{}") as JsonObject;
  } catch (error) {
    throw new UsageError(`--payload is not JSON: ${(error as Error).message}`);
  }
  if (typeof payload !== "object" || payload === null || Array.isArray(payload)) throw new UsageError("--payload must be a JSON object");
  const uploads = parseUploads(values.upload);
  const client = await openClient(url, values);
  const waitMs = values.wait ? (integerOption(values.timeout, "--timeout") ?? 300) * 1000 : undefined;
  const sent = await client.submit(values.type, payload, { taskId: values["task-id"], idempotencyKey: values["idempotency-key"], waitMs, uploads });
  if (values.watch) {
    if (values.json) printJson({ taskId: sent.taskId, reply: sent.reply ? messageJson(sent.reply) : null });
    else printLine(`submitted task ${sent.taskId}`);
    const state = await follow(client, sent.taskId, { json: values.json, untilInput: true });
    if (!values.json) for (const line of describeTask(await client.getTask(sent.taskId), { url, agentId: client.agentId })) printLine(line);
    return exitCodeFor(state);
  }
  if (values.json) {
    printJson({ taskId: sent.taskId, reply: sent.reply ? messageJson(sent.reply) : null, task: sent.task ? taskJson(sent.task) : null });
  } else if (sent.task) {
    for (const line of describeTask(sent.task, { url, agentId: client.agentId })) printLine(line);
  }
  return exitCodeFor(sent.task?.state);
}
