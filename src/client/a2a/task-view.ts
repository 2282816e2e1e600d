// An A2A task seen as a Synapse task (synapse.v1.Task), so that what shows
// Synapse tasks (the CLI's lines and JSON, exit statuses) shows A2A tasks
// the same way. A2A's states map onto ours; input-required becomes a request
// for information (or, when the agent's data part says need_human, for a
// decision); artifacts become the result's output. Nothing here is signed:
// the view carries no envelope.
import { create, toJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { timestampFromMs, ValueSchema } from "@bufbuild/protobuf/wkt";
import { TaskState as A2AState, type Artifact, type Message, type Part, type Task as A2ATask } from "../../../gen/lf/a2a/v1/a2a_pb.js";
import { ErrorCode } from "../../../gen/synapse/v1/errors_pb.js";
import { TaskSchema, type Task } from "../../../gen/synapse/v1/p2p_pb.js";
import { TaskState } from "../../../gen/synapse/v1/payloads_pb.js";
import { toValue } from "../../protocol/json-values.js";

const STATES: Record<A2AState, TaskState> = {
  [A2AState.UNSPECIFIED]: TaskState.UNSPECIFIED,
  [A2AState.SUBMITTED]: TaskState.PENDING,
  [A2AState.WORKING]: TaskState.EXECUTING,
  [A2AState.INPUT_REQUIRED]: TaskState.INFO_NEEDED,
  // Waiting for the client as input-required does: the caller has to act.
  [A2AState.AUTH_REQUIRED]: TaskState.INFO_NEEDED,
  [A2AState.COMPLETED]: TaskState.COMPLETED,
  [A2AState.FAILED]: TaskState.FAILED,
  [A2AState.CANCELED]: TaskState.CANCELLED,
  [A2AState.REJECTED]: TaskState.REJECTED,
};

/** The Synapse state an A2A state shows as (input-required as info_needed, or need_human when the agent asks for a decision). */
export function synapseStateOf(state: A2AState | undefined, message?: Message): TaskState {
  const mapped = STATES[state ?? A2AState.UNSPECIFIED] ?? TaskState.UNSPECIFIED;
  if (mapped === TaskState.INFO_NEEDED && dataOf(message)?.kind === "need_human") return TaskState.NEED_HUMAN;
  return mapped;
}

/** The text parts of a message, joined. */
export function textOf(message: Message | undefined): string {
  return (message?.parts ?? [])
    .map((part) => (part.content.case === "text" ? part.content.value : ""))
    .filter((text) => text !== "")
    .join(" ");
}

/** The first data part of a message that is a JSON object. */
function dataOf(message: Message | undefined): JsonObject | undefined {
  for (const part of message?.parts ?? []) {
    if (part.content.case !== "data") continue;
    const value = toJson(ValueSchema, part.content.value);
    if (value !== null && typeof value === "object" && !Array.isArray(value)) return value;
  }
  return undefined;
}

/** A part as JSON: text as a string, data as its value, files by their name, type and place. */
export function partValue(part: Part): JsonValue {
  switch (part.content.case) {
    case "text":
      return part.content.value;
    case "data":
      return toJson(ValueSchema, part.content.value);
    case "url":
      return { url: part.content.value, filename: part.filename, mediaType: part.mediaType };
    case "raw":
      return { filename: part.filename, mediaType: part.mediaType, size: part.content.value.byteLength };
    default:
      return null;
  }
}

/** An artifact as JSON: its one part's value, or the list of its parts' values. */
export function artifactValue(artifact: Artifact): JsonValue {
  const values = artifact.parts.map(partValue);
  return values.length === 1 ? values[0]! : values;
}

/** A task's artifacts as one output: the one artifact's value, or an object of them by name (else id). */
export function artifactsOutput(artifacts: readonly Artifact[]): JsonValue | undefined {
  if (artifacts.length === 0) return undefined;
  if (artifacts.length === 1) return artifactValue(artifacts[0]!);
  return Object.fromEntries(artifacts.map((artifact) => [artifact.name || artifact.artifactId, artifactValue(artifact)]));
}

function missingFieldsOf(data: JsonObject | undefined): Array<{ field: string; reason: string; suggestedValue?: ReturnType<typeof toValue> }> {
  const entries = Array.isArray(data?.missingFields) ? data.missingFields : [];
  return entries.flatMap((entry) => {
    if (entry === null || typeof entry !== "object" || Array.isArray(entry) || typeof entry.field !== "string") return [];
    return [{ field: entry.field, reason: typeof entry.reason === "string" ? entry.reason : "", ...(entry.suggestedValue === undefined ? {} : { suggestedValue: toValue(entry.suggestedValue) }) }];
  });
}

function decisionOptionsOf(data: JsonObject): Array<{ field: string; value: ReturnType<typeof toValue>; prosCons: string }> {
  const options = Array.isArray(data.options) ? data.options : [];
  return options.flatMap((option) => {
    if (option === null || typeof option !== "object" || Array.isArray(option) || typeof option.field !== "string") return [];
    return [{ field: option.field, value: toValue(option.value ?? null), prosCons: typeof option.prosCons === "string" ? option.prosCons : "" }];
  });
}

/** An A2A task as a Synapse task, for display; `taskType` is the skill asked for, when known. */
export function taskView(task: A2ATask, taskType = ""): Task {
  const statusMessage = task.status?.message;
  const state = synapseStateOf(task.status?.state, statusMessage);
  const text = textOf(statusMessage);
  const data = dataOf(statusMessage);
  const updatedAt = task.status?.timestamp;
  const view = create(TaskSchema, {
    taskId: task.id,
    taskType,
    state,
    progress: state === TaskState.COMPLETED ? 100 : 0,
    statusMessage: text,
    updatedAt: updatedAt ?? timestampFromMs(Date.now()),
  });
  if (state === TaskState.INFO_NEEDED) {
    view.pendingInfo = { $typeName: "synapse.v1.TaskNeedInfoPayload", taskId: task.id, question: text || (task.status?.state === A2AState.AUTH_REQUIRED ? "the agent asks for authentication" : "the agent asks for input"), missingFields: [] };
    view.pendingInfo.missingFields = missingFieldsOf(data).map((field) => ({ $typeName: "synapse.v1.MissingField", alternatives: [], ...field }));
  }
  if (state === TaskState.NEED_HUMAN && data !== undefined) {
    view.pendingDecision = {
      $typeName: "synapse.v1.TaskNeedHumanPayload",
      taskId: task.id,
      reason: { $typeName: "synapse.v1.HumanReason", code: typeof data.code === "string" ? data.code : "", message: text },
      options: decisionOptionsOf(data).map((option) => ({ $typeName: "synapse.v1.DecisionOption", confidence: 0, ...option })),
      escalationLevel: 1,
      decisionId: typeof data.decisionId === "string" ? data.decisionId : "",
      deciders: [],
    };
  }
  const output = artifactsOutput(task.artifacts);
  if (state === TaskState.COMPLETED || output !== undefined) {
    view.result = { $typeName: "synapse.v1.TaskResult", outputType: "", output: output === undefined ? undefined : toValue(output) };
  }
  if (state === TaskState.FAILED) view.error = { $typeName: "synapse.v1.TaskError", code: ErrorCode.EXECUTION_FAILED, message: text || "the agent reports the task failed", recoverable: false };
  // A cancel's reason, when the agent gave one, is what a Synapse task's cancel error says.
  if (state === TaskState.CANCELLED && text !== "") view.error = { $typeName: "synapse.v1.TaskError", code: ErrorCode.TASK_CANCELLED, message: text, recoverable: false };
  if (state === TaskState.REJECTED) {
    view.rejection = { $typeName: "synapse.v1.TaskRejectPayload", taskId: task.id, reason: { $typeName: "synapse.v1.Reason", code: ErrorCode.UNSPECIFIED, message: text || "the agent rejected the task" } };
  }
  return view;
}
