// `synapse group task`: submit a group task (broadcast, shard or quorum),
// show it, answer a sub-task's question, or cancel it.
import { toJson, type JsonObject } from "@bufbuild/protobuf";
import { GroupDecisionAction, GroupTaskState, GroupTaskStrategy } from "../../../gen/synapse/v1/a2n_pb.js";
import { GroupTaskSchema } from "../../../gen/synapse/v1/group_pb.js";
import type { GroupSendResult } from "../../client/group-client.js";
import { integerOption, parse, requirePositional, UsageError } from "../args.js";
import { agentAt, clientOptions, openGroupClient, parseAssignments } from "../client.js";
import { describeGroupEvent, describeGroupTask, groupTaskExit, sendJson } from "../group-output.js";
import { printJson, printLine } from "../output.js";

export const groupTaskUsage = `usage: synapse group task URL GROUP_ID --type TASK_TYPE (--payload JSON | --shards JSON_ARRAY [--payload JSON])
                            [--strategy broadcast|shard|quorum] [--quorum K] [--member AGENT_ID|URL]...
                            [--member-timeout SECONDS] [--max-attempts N] [--confidential] [--task-id ID] [--wait [--timeout SECONDS]]
       synapse group task URL GROUP_ID --task-id ID [--wait [--timeout SECONDS]]           (show it)
       synapse group task URL GROUP_ID --task-id ID --answer SUBTASK_ID (--set K=V ... | --approve | --modify --set K=V ... | --reject)
       synapse group task URL GROUP_ID --task-id ID --cancel [--reason TEXT]
Every form takes --home DIR, --protocol P and --json.

A coordinator's group task runs as P2P tasks at the members, requested and
signed by the host: broadcast (every member, the default; --payload), shard
(one sub-task per element of --shards, dealt to free members, a failed shard
retried on another member) or quorum (done when K of them completed); --member
(repeatable; an agent id or an agent's URL) picks the members, in order. The
members' signed task_complete messages come back in the group task; a sub-task
id is GROUP_TASK_ID.SLOT.ATTEMPT (the first sub-task of task sum is sum.0.1).
--confidential seals each sub-task to its member's encryption key (one task key
per sub-task, wrapped to the member and to the host): only the host and that
member read it.
Exit status: 0 completed (or running), 1 failed or cancelled (or refused),
2 usage error, 3 a sub-task waits for an answer (--answer it).`;

const strategies: Record<string, GroupTaskStrategy> = { broadcast: GroupTaskStrategy.BROADCAST, shard: GroupTaskStrategy.SHARD, quorum: GroupTaskStrategy.QUORUM };

function json<T>(text: string | undefined, name: string, check: (value: unknown) => value is T): T | undefined {
  if (text === undefined) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new UsageError(`${name} is not JSON: ${(error as Error).message}`);
  }
  if (!check(value)) throw new UsageError(`${name} has the wrong shape`);
  return value;
}

const isObject = (value: unknown): value is JsonObject => typeof value === "object" && value !== null && !Array.isArray(value);
const isObjects = (value: unknown): value is JsonObject[] => Array.isArray(value) && value.every(isObject);

export async function groupTask(argv: string[]): Promise<number> {
  const { values, positionals } = parse(
    argv,
    {
      ...clientOptions,
      type: { type: "string" },
      payload: { type: "string" },
      shards: { type: "string" },
      strategy: { type: "string" },
      quorum: { type: "string" },
      member: { type: "string", multiple: true },
      "member-timeout": { type: "string" },
      "max-attempts": { type: "string" },
      confidential: { type: "boolean" },
      "task-id": { type: "string" },
      wait: { type: "boolean" },
      timeout: { type: "string" },
      answer: { type: "string" },
      set: { type: "string", multiple: true },
      approve: { type: "boolean" },
      modify: { type: "boolean" },
      reject: { type: "boolean" },
      note: { type: "string" },
      cancel: { type: "boolean" },
      reason: { type: "string" },
    },
    groupTaskUsage,
  );
  if (values.help) {
    printLine(groupTaskUsage);
    return 0;
  }
  const url = requirePositional(positionals, 0, "URL", groupTaskUsage);
  const groupId = requirePositional(positionals, 1, "GROUP_ID", groupTaskUsage);
  const waitMs = values.wait ? (integerOption(values.timeout, "--timeout") ?? 300) * 1000 : undefined;
  const taskId = values["task-id"];
  const client = await openGroupClient(url, values);
  const report = (result: GroupSendResult) => {
    if (values.json) printJson(sendJson(result));
    else {
      printLine(describeGroupEvent(result.reply));
      if (result.groupTask) for (const line of describeGroupTask(result.groupTask, url)) printLine(line);
    }
    return groupTaskExit(result.groupTask);
  };

  if (values.type === undefined) {
    if (taskId === undefined) throw new UsageError(`--type (to submit) or --task-id (to show, answer or cancel) is required\n\n${groupTaskUsage}`);
    if (values.cancel) return report(await client.cancelTask(groupId, taskId, values.reason));
    if (values.answer !== undefined) {
      const actions = (["approve", "modify", "reject"] as const).filter((action) => values[action]);
      if (actions.length > 1) throw new UsageError(`give at most one of --approve, --modify, --reject\n\n${groupTaskUsage}`);
      const fields = parseAssignments(values.set);
      const action = actions[0];
      const answer =
        action === undefined
          ? { info: fields }
          : {
              decision: {
                action: { approve: GroupDecisionAction.APPROVE, modify: GroupDecisionAction.MODIFY, reject: GroupDecisionAction.REJECT }[action],
                fields,
                rejectionReason: values.reason ?? "",
              },
            };
      if (action === undefined && Object.keys(fields).length === 0) throw new UsageError(`--answer takes --set K=V (information) or a decision\n\n${groupTaskUsage}`);
      return report(await client.answer(groupId, taskId, values.answer, answer, values.note ?? "", waitMs));
    }
    let task = await client.getGroupTask(groupId, taskId);
    if (waitMs !== undefined && task.state === GroupTaskState.RUNNING) {
      const from = Number((await client.getGroup(groupId)).group?.lastSequence ?? 0) + 1;
      const signal = AbortSignal.timeout(waitMs);
      try {
        for await (const item of client.watch(groupId, { fromSequence: from, signal })) {
          if (item.kind !== "event" || item.event.payload.subjectId !== taskId) continue;
          task = await client.getGroupTask(groupId, taskId);
          if (task.state !== GroupTaskState.RUNNING) break;
        }
      } catch (error) {
        if (!signal.aborted) throw error;
        task = await client.getGroupTask(groupId, taskId);
      }
    }
    if (values.json) printJson({ groupTask: toJson(GroupTaskSchema, task) });
    else for (const line of describeGroupTask(task, url)) printLine(line);
    return groupTaskExit(task);
  }

  const strategy = strategies[(values.strategy ?? (values.shards ? "shard" : "broadcast")).toLowerCase()];
  if (strategy === undefined) throw new UsageError(`--strategy must be broadcast, shard or quorum\n\n${groupTaskUsage}`);
  const result = await client.submitTask(
    groupId,
    {
      groupTaskId: taskId,
      taskType: values.type,
      payload: json(values.payload, "--payload", isObject),
      strategy,
      shards: json(values.shards, "--shards", isObjects),
      quorum: integerOption(values.quorum, "--quorum"),
      members: values.member === undefined ? undefined : await Promise.all(values.member.map((member) => (/^https?:\/\//.test(member) ? agentAt(member, values).then((agent) => agent.agentId) : member))),
      memberTimeoutMs: values["member-timeout"] === undefined ? undefined : integerOption(values["member-timeout"], "--member-timeout")! * 1000,
      maxAttempts: integerOption(values["max-attempts"], "--max-attempts"),
      confidential: values.confidential,
    },
    waitMs,
  );
  return report(result);
}
