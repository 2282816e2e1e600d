// The commands that show and steer a task (submit, status, watch, cancel,
// provide-info, decide) against an A2A v1.0 agent. Which kind of agent a URL
// is: --a2a says A2A; a URL naming a .json document is an A2A card; else the
// agent's Synapse capabilities are asked for, and when no Synapse agent
// answers but an A2A card is served there, the agent is an A2A agent. A2A
// tasks are shown through the same printers as Synapse tasks (taskView), so
// lines, JSON fields and exit statuses mean the same.
import { toJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import { join } from "node:path";
import { existsSync } from "node:fs";
import { StreamResponseSchema, TaskSchema as A2ATaskSchema, type StreamResponse, type Task as A2ATask } from "../../gen/lf/a2a/v1/a2a_pb.js";
import { TaskState } from "../../gen/synapse/v1/payloads_pb.js";
import type { Task } from "../../gen/synapse/v1/p2p_pb.js";
import { IDENTITY_FILE, loadOrCreateIdentity } from "../agent/identity.js";
import { A2AClient, dataPart, synapseAgentIdAt, type A2AAuth, type PartInput } from "../client/a2a/a2a-client.js";
import type { A2ABinding } from "../client/a2a/card.js";
import { A2AClientError } from "../client/a2a/errors.js";
import { artifactValue, synapseStateOf, taskView, textOf } from "../client/a2a/task-view.js";
import type { SynapseClient } from "../client/requester.js";
import { findErrorDetail } from "../protocol/errors.js";
import { UsageError } from "./args.js";
import { openClient } from "./client.js";
import { followItems, type FollowItem } from "./follow.js";
import { synapseHome } from "./home.js";
import { printJson, printLine } from "./output.js";
import { exitCodeFor } from "./exit-codes.js";
import { describeTask, eventLine, taskJson } from "./task-output.js";

/** The options of the commands that may talk to an A2A agent. */

/** The lines about an A2A task, with hints that name the agent as the user gave it (the user being the task's requester). */
function describeA2ATask(client: A2AClient, task: Task): string[] {
  const url = client.cardUrl.replace(/\/\.well-known\/agent-card\.json$/, "");
  // The user asked this agent for the task, so the lines address it as the requester, whatever id the agent knows it by.
  return describeTask(task, { url, agentId: task.requester?.agentId ?? "the requester" });
}

export const a2aOptions = {
  a2a: { type: "boolean" },
  binding: { type: "string" },
  token: { type: "string" },
} as const;

export const A2A_USAGE = `A2A agents: a URL that serves no Synapse agent but an A2A v1.0 card
(/.well-known/agent-card.json), a card URL, or --a2a, is called over A2A:
--binding grpc|jsonrpc|rest picks the binding (default: gRPC, then JSON-RPC,
then HTTP+JSON, as the card offers), --token T sends a bearer token.`;

const BINDINGS: Record<string, A2ABinding> = { grpc: "GRPC", jsonrpc: "JSONRPC", "json-rpc": "JSONRPC", rest: "HTTP+JSON", "http+json": "HTTP+JSON" };

interface TargetValues {
  home?: string;
  protocol?: string;
  a2a?: boolean;
  binding?: string;
  token?: string;
}

export type Target = { kind: "synapse"; client: SynapseClient } | { kind: "a2a"; client: A2AClient };

/** An A2A client for the agent at the URL, authenticated with --token, or with the user's key when the agent is also a Synapse agent. */
export async function openA2AClient(url: string, values: TargetValues, knownNotSynapse = false): Promise<A2AClient> {
  let bindings: A2ABinding[] | undefined;
  if (values.binding !== undefined) {
    const binding = BINDINGS[values.binding.toLowerCase()];
    if (binding === undefined) throw new UsageError(`--binding takes grpc, jsonrpc or rest, got ${JSON.stringify(values.binding)}`);
    bindings = [binding];
  }
  let auth: A2AAuth | undefined;
  if (values.token !== undefined) auth = { token: values.token };
  else {
    const audience = knownNotSynapse ? undefined : await synapseAgentIdAt(url);
    if (audience !== undefined) {
      const home = synapseHome(values.home);
      const { identity } = await loadOrCreateIdentity(home, existsSync(join(home, IDENTITY_FILE)) ? {} : { agentName: "synapse command line" });
      auth = { identity, audience };
    }
  }
  const client = await A2AClient.connect({ url, bindings, auth });
  const card = client.cardSignature;
  const signature = card.status === "verified" ? `signature verified (kid ${card.kid})` : card.status === "unsigned" ? "unsigned card" : `signed card, signature not checked: ${card.reason}`;
  process.stderr.write(`A2A agent ${JSON.stringify(client.card.name)} over ${client.binding} at ${client.endpoint.url}; ${signature}\n`);
  return client;
}

/** The agent at a URL: a Synapse agent, or an A2A agent (see the head of this file). */
export async function openTarget(url: string, values: TargetValues): Promise<Target> {
  if (values.a2a || /\.json$/i.test(new URL(url).pathname)) return { kind: "a2a", client: await openA2AClient(url, values) };
  try {
    return { kind: "synapse", client: await openClient(url, values) };
  } catch (error) {
    // A Synapse agent that answered with a protocol error (a key conflict, say) is a Synapse agent.
    if (!(error instanceof ConnectError) || findErrorDetail(error) !== undefined) throw error;
    try {
      return { kind: "a2a", client: await openA2AClient(url, values, true) };
    } catch (a2aError) {
      if (a2aError instanceof A2AClientError && a2aError.kind === "CardInvalid") throw error;
      throw a2aError;
    }
  }
}

/** A blocking SendMessage bounded by --timeout: its answer, or a clear error when none came in time. */
async function sendWithin<T>(timeoutMs: number | undefined, send: (signal: AbortSignal | undefined) => Promise<T>): Promise<T> {
  const signal = timeoutMs === undefined ? undefined : AbortSignal.timeout(timeoutMs);
  try {
    return await send(signal);
  } catch (error) {
    if (signal?.aborted) throw new A2AClientError("Unavailable", `no answer within ${Math.round(timeoutMs! / 1000)} s (the agent may still work on the message)`, {}, { cause: error });
    throw error;
  }
}

/** An A2A task as the JSON `synapse status --json` prints, plus the A2A task itself under `a2a`. */
function a2aTaskJson(task: A2ATask, taskType = ""): JsonObject {
  return { ...(taskJson(taskView(task, taskType)) as JsonObject), a2a: toJson(A2ATaskSchema, task) };
}

/** The exit statuses of Synapse tasks (0, 1, 3), for an A2A task. */
function stateOfTask(task: A2ATask): TaskState {
  return taskView(task).state;
}

const EVENT_TYPES: Record<NonNullable<StreamResponse["payload"]["case"]>, string> = {
  task: "a2a:task",
  message: "a2a:message",
  statusUpdate: "a2a:status_update",
  artifactUpdate: "a2a:artifact_update",
};

/** An A2A stream as FollowItems: each event numbered in arrival order, with the state it leaves the task in. */
async function* streamItems(events: AsyncIterable<StreamResponse>, first?: StreamResponse): AsyncGenerator<FollowItem> {
  let sequence = 0;
  let state = TaskState.UNSPECIFIED;
  const item = (event: StreamResponse): FollowItem | undefined => {
    const payload = event.payload;
    if (payload.case === undefined) return undefined;
    let detail = "";
    if (payload.case === "task" || payload.case === "statusUpdate") {
      state = synapseStateOf(payload.value.status?.state, payload.value.status?.message);
      detail = textOf(payload.value.status?.message);
    } else if (payload.case === "artifactUpdate") {
      const artifact = payload.value.artifact;
      detail = artifact ? `${artifact.name || artifact.artifactId}: ${JSON.stringify(artifactValue(artifact))}` : "";
    } else detail = textOf(payload.value);
    sequence++;
    const json = { type: EVENT_TYPES[payload.case], payload: (toJson(StreamResponseSchema, event) as JsonObject)[payload.case] ?? {} };
    return { kind: "event", sequence, state, line: eventLine(sequence, EVENT_TYPES[payload.case], state, undefined, detail), json };
  };
  if (first !== undefined) {
    const shown = item(first);
    if (shown) yield shown;
  }
  for await (const event of events) {
    const shown = item(event);
    if (shown) yield shown;
  }
}

/** A task's events from now on: SubscribeToTask, or the task as it ended when it has ended. */
async function* subscribeOrEnded(client: A2AClient, taskId: string): AsyncGenerator<StreamResponse> {
  try {
    yield* client.subscribeToTask(taskId);
  } catch (error) {
    if (!(error instanceof A2AClientError) || error.kind !== "UnsupportedOperation") throw error;
    yield { $typeName: "lf.a2a.v1.StreamResponse", payload: { case: "task", value: await client.getTask(taskId) } };
  }
}

export interface A2ASubmit {
  type?: string;
  payload: JsonObject;
  text?: string;
  wait?: boolean;
  watch?: boolean;
  timeoutMs: number;
  idempotencyKey?: string;
  json?: boolean;
}

/** `synapse submit` to an A2A agent: a SendMessage whose data part is the payload (and text part --text), the type as metadata.taskType. */
export async function submitA2A(client: A2AClient, options: A2ASubmit): Promise<number> {
  const parts: PartInput[] = [];
  if (options.text !== undefined) parts.push(options.text);
  if (Object.keys(options.payload).length > 0 || parts.length === 0) parts.push(dataPart(options.payload));
  const input = { parts, metadata: options.type ? { taskType: options.type } : undefined, messageId: options.idempotencyKey };
  if (options.watch) {
    const events = client.sendStreamingMessage(input)[Symbol.asyncIterator]();
    const first = await events.next();
    if (first.done) throw new A2AClientError("InvalidAgentResponse", "the agent's stream ended before it said anything");
    const taskId = first.value.payload.case === "task" ? first.value.payload.value.id : "";
    if (options.json) printJson({ taskId, reply: null });
    else printLine(`submitted task ${taskId}`);
    const state = await followItems(streamItems({ [Symbol.asyncIterator]: () => events }, first.value), { json: options.json, untilInput: true });
    if (!options.json && taskId) for (const line of describeA2ATask(client, taskView(await client.getTask(taskId), options.type ?? ""))) printLine(line);
    return exitCodeFor(state);
  }
  const result = await sendWithin(options.wait ? options.timeoutMs : undefined, (signal) => client.sendMessage(input, { returnImmediately: !options.wait, signal }));
  if (result.message !== undefined) {
    // The agent answered with a message and made no task.
    if (options.json) printJson({ taskId: "", reply: null, task: null, message: toJson(StreamResponseSchema, { $typeName: "lf.a2a.v1.StreamResponse", payload: { case: "message", value: result.message } }) });
    else printLine(`the agent answered: ${textOf(result.message)}`);
    return 0;
  }
  const task = result.task!;
  if (options.json) printJson({ taskId: task.id, reply: null, task: a2aTaskJson(task, options.type) });
  else for (const line of describeA2ATask(client, taskView(task, options.type ?? ""))) printLine(line);
  return exitCodeFor(stateOfTask(task));
}

export async function statusA2A(client: A2AClient, taskId: string, json: boolean | undefined): Promise<number> {
  const task = await client.getTask(taskId);
  if (json) printJson(a2aTaskJson(task));
  else for (const line of describeA2ATask(client, taskView(task))) printLine(line);
  return exitCodeFor(stateOfTask(task));
}

export async function watchA2A(client: A2AClient, taskId: string, json: boolean | undefined): Promise<TaskState | undefined> {
  return followItems(streamItems(subscribeOrEnded(client, taskId)), { json });
}

export async function cancelA2A(client: A2AClient, taskId: string, json: boolean | undefined): Promise<number> {
  const task = await client.cancelTask(taskId);
  if (json) printJson({ reply: null, task: a2aTaskJson(task) });
  else for (const line of describeA2ATask(client, taskView(task))) printLine(line);
  const state = stateOfTask(task);
  return state === TaskState.CANCELLED ? 0 : exitCodeFor(state);
}

/** The answer to input-required: a follow-up message on the task with the parts given. */
export async function answerA2A(
  client: A2AClient,
  taskId: string,
  parts: PartInput[],
  options: { wait?: boolean; timeoutMs: number; json?: boolean },
): Promise<number> {
  const task = await client.getTask(taskId, { historyLength: 0 });
  const result = await sendWithin(options.wait ? options.timeoutMs : undefined, (signal) => client.reply(task, parts, { returnImmediately: !options.wait, signal }));
  const answered = result.task ?? (await client.getTask(taskId, { historyLength: 0 }));
  if (options.json) printJson({ reply: null, task: a2aTaskJson(answered) });
  else for (const line of describeA2ATask(client, taskView(answered))) printLine(line);
  return exitCodeFor(stateOfTask(answered));
}

/** The parts of provide-info's answer: the fields as one data part, the note as text (alone when no field is set). */
export function infoParts(fields: Record<string, JsonValue>, note: string | undefined): PartInput[] {
  const parts: PartInput[] = [];
  if (Object.keys(fields).length > 0) parts.push(dataPart(fields));
  if (note !== undefined && note !== "") parts.push(note);
  return parts;
}

/** The parts of decide's answer: {"decision", "fields", "reason", "notes"} as one data part. */
export function decisionParts(action: "approve" | "modify" | "reject", fields: Record<string, JsonValue>, reason: string | undefined, notes: string | undefined): PartInput[] {
  const decision: JsonObject = { decision: action, fields };
  if (reason !== undefined) decision.reason = reason;
  if (notes !== undefined) decision.notes = notes;
  return [dataPart(decision)];
}
