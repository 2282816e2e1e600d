// `synapse submit URL --type T --payload JSON [--wait | --watch]`
import type { JsonObject } from "@bufbuild/protobuf";
import { integerOption, parse, requirePositional, UsageError } from "../args.js";
import { a2aOptions, A2A_USAGE, openTarget, submitA2A } from "../a2a.js";
import { clientOptions, parseUploads } from "../client.js";
import { follow } from "../follow.js";
import { readTaskKey, removeTaskKey } from "../task-key-file.js";
import { printJson, printLine } from "../output.js";
import { describeTask, messageJson, taskJson } from "../task-output.js";

export const submitUsage = `usage: synapse submit URL --type TASK_TYPE --payload JSON [--wait [--timeout SECONDS] | --watch]
                      [--upload NAME=SHA256:SIZE]... [--task-id ID] [--idempotency-key KEY] [--home DIR] [--protocol P] [--json]
                      [--confidential] [--a2a] [--binding B] [--token T] [--text TEXT]

Sends a signed p2p:task_request. --wait holds the reply until the task ends or
needs information or a decision (default timeout 300 s); --watch follows its
events. --confidential signs, then encrypts every message of the task to the
agent's published encryption key and to this requester's own (HPKE, see
docs/PROTOCOL.md §9): only the two can read it, and the agent keeps it sealed;
status, watch, provide-info and decide open it with the key in --home.
--upload names a file uploaded before for the handler, under NAME
(data_analysis reads one named csv): \`synapse upload URL FILE --name NAME\`
prints NAME=SHA256:SIZE as it goes here; with --confidential --task-id ID,
files that \`synapse upload --confidential --task-id ID\` sealed for the task
are opened with the key it kept in --home/tasks/ID.key (removed once the
request is sent). Exit status: 0 when the task completed
or is still under way, 1 when it failed, was rejected or cancelled (or the
request was refused), 3 when it waits for information or a decision.

${A2A_USAGE}
To an A2A agent the payload goes as a data part (--text adds a text part),
--type (optional there) as the message's metadata.taskType, and
--idempotency-key as its messageId.`;

import { exitCodeFor } from "../exit-codes.js";

export { exitCodeFor };

export async function submit(argv: string[]): Promise<number> {
  const { values, positionals } = parse(
    argv,
    {
      ...clientOptions,
      ...a2aOptions,
      text: { type: "string" },
      type: { type: "string" },
      payload: { type: "string" },
      wait: { type: "boolean" },
      watch: { type: "boolean" },
      timeout: { type: "string" },
      "task-id": { type: "string" },
      "idempotency-key": { type: "string" },
      upload: { type: "string", multiple: true },
      confidential: { type: "boolean" },
    },
    submitUsage,
  );
  if (values.help) {
    printLine(submitUsage);
    return 0;
  }
  const url = requirePositional(positionals, 0, "URL", submitUsage);
  if (values.wait && values.watch) throw new UsageError(`--wait and --watch go one at a time\n\n${submitUsage}`);
  let payload: JsonObject;
  try {
    payload = JSON.parse(values.payload ?? "{}") as JsonObject;
  } catch (error) {
    throw new UsageError(`--payload is not JSON: ${(error as Error).message}`);
  }
  if (typeof payload !== "object" || payload === null || Array.isArray(payload)) throw new UsageError("--payload must be a JSON object");
  const uploads = parseUploads(values.upload);
  const target = await openTarget(url, values);
  const waitMs = values.wait ? (integerOption(values.timeout, "--timeout") ?? 300) * 1000 : undefined;
  if (target.kind === "a2a") {
    if (values["task-id"] !== undefined) throw new UsageError("--task-id: an A2A agent chooses its tasks' ids");
    if (uploads.length > 0) throw new UsageError("--upload: uploads are Synapse's; send files to an A2A agent as parts");
    if (values.confidential) throw new UsageError("--confidential: A2A has no confidential tasks (it relies on TLS alone)");
    return submitA2A(target.client, {
      type: values.type,
      payload,
      text: values.text,
      wait: values.wait,
      watch: values.watch,
      timeoutMs: waitMs ?? 300_000,
      idempotencyKey: values["idempotency-key"],
      json: values.json,
    });
  }
  if (!values.type) throw new UsageError(`--type is required\n\n${submitUsage}`);
  if (values.text !== undefined) throw new UsageError("--text is for A2A agents; put the text in --payload");
  const client = target.client;
  const taskId = values["task-id"];
  // The key `synapse upload --confidential` made for this task, if it sealed files with it.
  const taskKey = values.confidential && taskId !== undefined ? await readTaskKey(values.home, taskId) : undefined;
  const sent = await client.submit(values.type, payload, { taskId, idempotencyKey: values["idempotency-key"], waitMs, uploads, confidential: values.confidential, taskKey });
  if (taskKey !== undefined && sent.reply !== undefined) await removeTaskKey(values.home, sent.taskId);
  // A confidential task's view carries no content: it is read from its sealed events.
  if (values.confidential && sent.task) sent.task = await client.getTask(sent.taskId);
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
