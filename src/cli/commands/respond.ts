// The requester's answers to a task: `synapse cancel`, `synapse provide-info`
// and `synapse decide`.
import { TaskState } from "../../../gen/synapse/v1/payloads_pb.js";
import type { SendResult } from "../../client/requester.js";
import { integerOption, parse, requirePositional, UsageError } from "../args.js";
import { a2aOptions, A2A_USAGE, answerA2A, cancelA2A, decisionParts, infoParts, openTarget } from "../a2a.js";
import { clientOptions, parseAssignments } from "../client.js";
import { printJson, printLine } from "../output.js";
import { describeReply, describeTask, messageJson, taskJson, type Reader } from "../task-output.js";
import { exitCodeFor } from "./submit.js";

export const cancelUsage = `usage: synapse cancel URL TASK_ID [--reason TEXT] [--home DIR] [--protocol P] [--json] [--a2a] [--binding B] [--token T]

Sends p2p:task_cancel; the agent answers with p2p:task_ack and the task ends cancelled.
Exit status: 0 when the task is cancelled; 1 when the cancel is refused (for example
task_already_completed: the task had already ended).

${A2A_USAGE} To an A2A agent it is a CancelTask (TaskNotCancelable exits 1).`;

export const provideInfoUsage = `usage: synapse provide-info URL TASK_ID --set KEY=VALUE ... [--note TEXT] [--wait [--timeout SECONDS]] [--home DIR] [--protocol P] [--json]
                      [--a2a] [--binding B] [--token T]

Answers a p2p:task_need_info with p2p:task_info_provided. VALUE is parsed as JSON
when it can be (3, true, "text", [1,2]), else taken as a string.

${A2A_USAGE} To an A2A agent whose task is input-required it is a follow-up
message on the task: the --set fields as one data part, --note as a text part
(then --set may be left out).`;

export const decideUsage = `usage: synapse decide URL TASK_ID (--approve | --modify | --reject) [--set KEY=VALUE ...] [--note TEXT] [--reason TEXT]
                      [--user NAME] [--wait [--timeout SECONDS]] [--home DIR] [--protocol P] [--json]
                      [--a2a] [--binding B] [--token T]
                      [--a2a] [--binding B] [--token T]

Answers a p2p:task_need_human with p2p:human_decision. --approve resumes the task
(--set values are the approved fields), --modify resumes it with the --set values
merged into its payload, --reject ends it: it fails with human_rejected.

${A2A_USAGE} To an A2A agent it is a follow-up message on the task with one
data part {"decision": "approve" | "modify" | "reject", "fields": {...},
"reason": "...", "notes": "..."}.`;

const waitOptions = { wait: { type: "boolean" }, timeout: { type: "string" } } as const;

function waitMs(values: { wait?: boolean; timeout?: string }): number | undefined {
  return values.wait ? (integerOption(values.timeout, "--timeout") ?? 300) * 1000 : undefined;
}

function report(result: SendResult, json: boolean | undefined, reader: Reader): number {
  if (json) printJson({ reply: result.reply ? messageJson(result.reply) : null, task: result.task ? taskJson(result.task) : null });
  else if (result.task) for (const line of describeTask(result.task, reader)) printLine(line);
  return exitCodeFor(result.task?.state);
}

export async function cancel(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...clientOptions, ...a2aOptions, reason: { type: "string" } }, cancelUsage);
  if (values.help) {
    printLine(cancelUsage);
    return 0;
  }
  const url = requirePositional(positionals, 0, "URL", cancelUsage);
  const taskId = requirePositional(positionals, 1, "TASK_ID", cancelUsage);
  const target = await openTarget(url, values);
  if (target.kind === "a2a") return cancelA2A(target.client, taskId, values.json);
  const result = await target.client.cancel(taskId, values.reason ?? "");
  if (values.json) printJson({ reply: result.reply ? messageJson(result.reply) : null, task: result.task ? taskJson(result.task) : null });
  else if (result.reply) printLine(describeReply(result.reply));
  // What was asked for happened: the task is cancelled. (A refusal throws, and exits 1.)
  return result.task?.state === TaskState.CANCELLED ? 0 : exitCodeFor(result.task?.state);
}

export async function provideInfo(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...clientOptions, ...a2aOptions, ...waitOptions, set: { type: "string", multiple: true }, note: { type: "string" } }, provideInfoUsage);
  if (values.help) {
    printLine(provideInfoUsage);
    return 0;
  }
  const url = requirePositional(positionals, 0, "URL", provideInfoUsage);
  const taskId = requirePositional(positionals, 1, "TASK_ID", provideInfoUsage);
  const fields = parseAssignments(values.set);
  const target = await openTarget(url, values);
  if (target.kind === "a2a") {
    const parts = infoParts(fields, values.note);
    if (parts.length === 0) throw new UsageError(`give --set KEY=VALUE or --note TEXT\n\n${provideInfoUsage}`);
    return answerA2A(target.client, taskId, parts, { wait: values.wait, timeoutMs: waitMs(values) ?? 300_000, json: values.json });
  }
  if (!values.set?.length) throw new UsageError(`at least one --set KEY=VALUE is required\n\n${provideInfoUsage}`);
  return report(await target.client.provideInfo(taskId, fields, { note: values.note, waitMs: waitMs(values) }), values.json, { url, agentId: target.client.agentId });
}

export async function decide(argv: string[]): Promise<number> {
  const { values, positionals } = parse(
    argv,
    {
      ...clientOptions,
      ...a2aOptions,
      ...waitOptions,
      approve: { type: "boolean" },
      modify: { type: "boolean" },
      reject: { type: "boolean" },
      set: { type: "string", multiple: true },
      note: { type: "string" },
      reason: { type: "string" },
      user: { type: "string" },
    },
    decideUsage,
  );
  if (values.help) {
    printLine(decideUsage);
    return 0;
  }
  const url = requirePositional(positionals, 0, "URL", decideUsage);
  const taskId = requirePositional(positionals, 1, "TASK_ID", decideUsage);
  const actions = (["approve", "modify", "reject"] as const).filter((action) => values[action]);
  if (actions.length !== 1) throw new UsageError(`give exactly one of --approve, --modify, --reject\n\n${decideUsage}`);
  const target = await openTarget(url, values);
  if (target.kind === "a2a") {
    const parts = decisionParts(actions[0]!, parseAssignments(values.set), values.reason, values.note);
    return answerA2A(target.client, taskId, parts, { wait: values.wait, timeoutMs: waitMs(values) ?? 300_000, json: values.json });
  }
  const result = await target.client.decide(
    taskId,
    {
      action: actions[0]!,
      fields: parseAssignments(values.set),
      notes: values.note,
      rejectionReason: values.reason ?? values.note,
      decidedBy: { userName: values.user ?? process.env.USER ?? "" },
    },
    { waitMs: waitMs(values) },
  );
  return report(result, values.json, { url, agentId: target.client.agentId });
}
