// GetTask and ListTasks: the caller's tasks (every task for an operator),
// read through the engine's reader and shown as A2A Tasks.
import { create } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { ListTasksResponseSchema, TaskState as A2AState, type ListTasksRequest, type ListTasksResponse, type Task } from "../../gen/lf/a2a/v1/a2a_pb.js";
import type { Agent } from "../agent/agent.js";
import type { TaskRecord } from "../store/store.js";
import type { A2ACaller } from "./auth.js";
import { a2aTask, INLINE_RESULT_BYTES, withoutContent, type ConvertContext, type TaskShape } from "./convert.js";
import { a2aError } from "./errors.js";
import { readerOf } from "./send.js";
import { synapseStates } from "./states.js";
import { inA2ATerms } from "./synapse-errors.js";

export const DEFAULT_LIST_PAGE_SIZE = 50;
export const MAX_LIST_PAGE_SIZE = 100;
/** The most of a caller's tasks one ListTasks looks through (it sorts them by last update). */
export const MAX_LISTED_TASKS = 10_000;
const STORE_PAGE = 500;

/** A historyLength as the converter takes it; negative is invalid. */
export function historyShape(historyLength: number | undefined, field = "historyLength"): number | undefined {
  if (historyLength !== undefined && historyLength < 0) {
    throw a2aError("InvalidParams", `${field} must not be negative`, { fieldViolations: [{ field, description: "0 or more" }] });
  }
  return historyLength;
}

/** The A2A Task for a record, with its event log read when history is wanted and a small result stream inlined. */
export async function loadTask(agent: Agent, convert: ConvertContext, task: TaskRecord, shape: TaskShape): Promise<Task> {
  // A2A has no confidential messages: a confidential task shows A2A its id and state, its content only its Synapse parties.
  if (task.confidential !== undefined) return a2aTask(withoutContent(task), convert, shape);
  const events = shape.historyLength === 0 ? [] : await agent.store.listEvents(task.taskId, 1);
  let streamBytes: Uint8Array | undefined;
  const stream = task.resultStream;
  if (shape.includeArtifacts !== false && task.result !== undefined && stream !== undefined && stream.totalSize <= INLINE_RESULT_BYTES) {
    streamBytes = await agent.store.readResult(task.taskId, 0, stream.totalSize);
  }
  return a2aTask(task, convert, shape, events, streamBytes);
}

export async function getTask(agent: Agent, convert: ConvertContext, caller: A2ACaller, id: string, historyLength: number | undefined): Promise<Task> {
  const shape = { historyLength: historyShape(historyLength) };
  const task = await inA2ATerms(() => agent.reader.getTask(id, readerOf(caller)));
  return loadTask(agent, convert, task, shape);
}

interface ListCursor {
  updatedAtMs: number;
  taskId: string;
}

const encodeCursor = (task: TaskRecord) => Buffer.from(JSON.stringify({ u: task.updatedAtMs, t: task.taskId })).toString("base64url");

function decodeCursor(token: string): ListCursor {
  try {
    const parsed = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as { u: unknown; t: unknown };
    if (typeof parsed.u === "number" && typeof parsed.t === "string") return { updatedAtMs: parsed.u, taskId: parsed.t };
  } catch {
    // fall through
  }
  throw a2aError("InvalidParams", "pageToken is not one this agent issued", { fieldViolations: [{ field: "pageToken", description: "a nextPageToken from ListTasks" }] });
}

/** Most recently updated first; the task id breaks ties. */
const newerFirst = (a: TaskRecord, b: TaskRecord) => b.updatedAtMs - a.updatedAtMs || (a.taskId < b.taskId ? -1 : a.taskId > b.taskId ? 1 : 0);
const after = (task: TaskRecord, cursor: ListCursor) => task.updatedAtMs < cursor.updatedAtMs || (task.updatedAtMs === cursor.updatedAtMs && task.taskId > cursor.taskId);

export async function listTasks(agent: Agent, convert: ConvertContext, caller: A2ACaller, request: ListTasksRequest): Promise<ListTasksResponse> {
  const pageSize = request.pageSize ?? DEFAULT_LIST_PAGE_SIZE;
  if (pageSize < 1 || pageSize > MAX_LIST_PAGE_SIZE) {
    throw a2aError("InvalidParams", `pageSize must be 1 to ${MAX_LIST_PAGE_SIZE}`, { fieldViolations: [{ field: "pageSize", description: `1 to ${MAX_LIST_PAGE_SIZE}` }] });
  }
  const historyLength = historyShape(request.historyLength);
  const cursor = request.pageToken ? decodeCursor(request.pageToken) : undefined;
  const states = request.status === A2AState.UNSPECIFIED ? [] : synapseStates(request.status);
  const since = request.statusTimestampAfter === undefined ? undefined : timestampMs(request.statusTimestampAfter);
  const matching: TaskRecord[] = [];
  // AUTH_REQUIRED stands for no Synapse state: nothing matches.
  if (request.status === A2AState.UNSPECIFIED || states.length > 0) {
    let token = "";
    do {
      const page = await inA2ATerms(() => agent.reader.listTasks(readerOf(caller), STORE_PAGE, token, states));
      for (const task of page.tasks) {
        if (request.contextId !== "" && (task.carried?.sessionId ?? "") !== request.contextId) continue;
        if (since !== undefined && task.updatedAtMs < since) continue;
        matching.push(task);
      }
      token = page.nextPageToken;
    } while (token !== "" && matching.length < MAX_LISTED_TASKS);
  }
  matching.sort(newerFirst);
  const rest = cursor === undefined ? matching : matching.filter((task) => after(task, cursor));
  const page = rest.slice(0, pageSize);
  const shape: TaskShape = { historyLength: historyLength ?? 0, includeArtifacts: request.includeArtifacts === true };
  const tasks = await Promise.all(page.map((task) => loadTask(agent, convert, task, shape)));
  return create(ListTasksResponseSchema, {
    tasks,
    nextPageToken: rest.length > pageSize ? encodeCursor(page[page.length - 1]!) : "",
    pageSize,
    totalSize: matching.length,
  });
}
