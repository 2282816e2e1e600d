// A TaskStore that keeps confidential tasks sealed at rest (docs/PROTOCOL.md
// §9.6): before a confidential task's record goes to the store underneath,
// its content (request, input, questions, answers, status line, result,
// error) is sealed into one value under the task's key and the fields are
// emptied; on the way back it is opened again, and so are the payloads of
// its sealed events, and of the sealed events executors pushed for the
// confidential tasks this agent requested. What the engine sees is
// plaintext, in memory only.
// Every other task, and every other method, passes through unchanged.
import { create, fromBinary, toBinary, type JsonObject, type Message } from "@bufbuild/protobuf";
import {
  TaskErrorSchema,
  TaskNeedHumanPayloadSchema,
  TaskNeedInfoPayloadSchema,
  TaskRejectPayloadSchema,
  TaskRequestPayloadSchema,
  TaskResultSchema,
} from "../../gen/synapse/v1/payloads_pb.js";
import { openAtRest, openSealedPayload, sealAtRest } from "../envelope/confidential.js";
import { messageTypeInfo } from "../protocol/message-types.js";
import type { CommitOptions, CreateOptions, ListTasksQuery, NewTask, StoredEvent, TaskPatch, TaskRecord, TaskStore } from "../store/store.js";
import type { TaskKeys } from "./task-keys.js";

/** The fields of a record that carry a task's content. */
type Content = Pick<TaskRecord, "request" | "payload" | "pendingInfo" | "pendingDecision" | "result" | "error" | "rejection" | "answers" | "statusMessage">;
const CONTENT_FIELDS = ["request", "payload", "pendingInfo", "pendingDecision", "result", "error", "rejection", "answers", "statusMessage"] as const satisfies ReadonlyArray<keyof Content>;

const b64 = (message: Message | undefined, schema: Parameters<typeof toBinary>[0]) => (message === undefined ? null : Buffer.from(toBinary(schema, message)).toString("base64"));
const unb64 = <T extends Message>(text: string | null, schema: Parameters<typeof fromBinary>[0]) => (text === null ? undefined : (fromBinary(schema, Buffer.from(text, "base64")) as T));

// The request, sealed once when the task is made (it may be large, and never changes); the rest at each change.
function encodeRequest(request: TaskRecord["request"]): Uint8Array {
  return toBinary(TaskRequestPayloadSchema, request);
}

function encodeState(content: Content): Uint8Array {
  // The input is most often the request's payload itself: then it is not written twice.
  const inputIsRequest = content.request.task?.payload !== undefined && content.payload === content.request.task.payload;
  return Buffer.from(
    JSON.stringify({
      payload: inputIsRequest ? null : content.payload,
      pendingInfo: b64(content.pendingInfo, TaskNeedInfoPayloadSchema),
      pendingDecision: b64(content.pendingDecision, TaskNeedHumanPayloadSchema),
      result: b64(content.result, TaskResultSchema),
      error: b64(content.error, TaskErrorSchema),
      rejection: b64(content.rejection, TaskRejectPayloadSchema),
      answers: content.answers,
      statusMessage: content.statusMessage,
    }),
  );
}

function decodeContent(requestBytes: Uint8Array, stateBytes: Uint8Array): Content {
  const request = fromBinary(TaskRequestPayloadSchema, requestBytes);
  const parsed = JSON.parse(Buffer.from(stateBytes).toString("utf8")) as Record<string, unknown>;
  return {
    request,
    payload: (parsed.payload as JsonObject | null) ?? request.task?.payload ?? {},
    pendingInfo: unb64(parsed.pendingInfo as string | null, TaskNeedInfoPayloadSchema),
    pendingDecision: unb64(parsed.pendingDecision as string | null, TaskNeedHumanPayloadSchema),
    result: unb64(parsed.result as string | null, TaskResultSchema),
    error: unb64(parsed.error as string | null, TaskErrorSchema),
    rejection: unb64(parsed.rejection as string | null, TaskRejectPayloadSchema),
    answers: parsed.answers as TaskRecord["answers"],
    statusMessage: parsed.statusMessage as string,
  };
}

/**
 * What the store underneath keeps of a confidential task's content: the
 * task type (its request names nothing else) and, for a pending decision,
 * only its id and deadline, which escalation finds due tasks by.
 */
function emptied(content: Content, taskId: string, taskType: string): Content {
  return {
    request: create(TaskRequestPayloadSchema, { task: { id: taskId, type: taskType } }),
    payload: {},
    pendingInfo: undefined,
    pendingDecision:
      content.pendingDecision === undefined ? undefined : create(TaskNeedHumanPayloadSchema, { decisionId: content.pendingDecision.decisionId, deadline: content.pendingDecision.deadline }),
    result: undefined,
    error: undefined,
    rejection: undefined,
    answers: [],
    statusMessage: "",
  };
}

const contentOf = (record: Content): Content => ({
  request: record.request,
  payload: record.payload,
  pendingInfo: record.pendingInfo,
  pendingDecision: record.pendingDecision,
  result: record.result,
  error: record.error,
  rejection: record.rejection,
  answers: record.answers,
  statusMessage: record.statusMessage,
});

/** What sealing a task's content needs of its record. */
type Owner = Pick<TaskRecord, "taskId" | "taskType" | "requester" | "confidential">;
const ownerOf = (task: Owner): Owner => ({ taskId: task.taskId, taskType: task.taskType, requester: task.requester, confidential: task.confidential });

export class SealedContent {
  // Each confidential task's content as last written or read, by version: a commit seals the whole of it again.
  private readonly latest = new Map<string, { version: number; content: Content; owner: Owner }>();
  // Whether each task lately seen is confidential, so that a commit to a plaintext task reads nothing first.
  private readonly kinds = new Map<string, boolean>();

  constructor(
    private readonly inner: TaskStore,
    private readonly keys: TaskKeys,
  ) {}

  private sealState(task: Owner, content: Content): Uint8Array {
    return sealAtRest(this.keys.of(task), task.taskId, encodeState(content), "state");
  }

  private sealRequest(task: Owner, content: Content): Uint8Array {
    return sealAtRest(this.keys.of(task), task.taskId, encodeRequest(content.request), "request");
  }

  /** A stored record with its content opened (a plaintext task as it is). */
  opened(record: TaskRecord): TaskRecord;
  opened(record: TaskRecord | undefined): TaskRecord | undefined;
  opened(record: TaskRecord | undefined): TaskRecord | undefined {
    if (record !== undefined) this.noteKind(record.taskId, record.confidential !== undefined);
    if (record?.confidential === undefined || record.sealed === undefined || record.sealedRequest === undefined) return record;
    // The version last written or read here is the same content: nothing to open again.
    const known = this.latest.get(record.taskId);
    if (known !== undefined && known.version === record.version) return { ...record, ...known.content, sealed: undefined, sealedRequest: undefined };
    const key = this.keys.of(record);
    const content = decodeContent(openAtRest(key, record.taskId, record.sealedRequest, "request"), openAtRest(key, record.taskId, record.sealed, "state"));
    this.remember(record.taskId, record.version, content, ownerOf(record));
    return { ...record, ...content, sealed: undefined, sealedRequest: undefined };
  }

  private noteKind(taskId: string, confidential: boolean): void {
    if (this.kinds.get(taskId) === confidential) return;
    if (this.kinds.size >= 100_000) this.kinds.delete(this.kinds.keys().next().value!);
    this.kinds.set(taskId, confidential);
  }

  private remember(taskId: string, version: number, content: Content, owner: Owner): void {
    if (this.latest.size >= 10_000 && !this.latest.has(taskId)) this.latest.delete(this.latest.keys().next().value!);
    this.latest.set(taskId, { version, content, owner });
  }

  async createTask(task: NewTask, firstEvent: StoredEvent, options?: CreateOptions): Promise<TaskRecord> {
    this.noteKind(task.taskId, task.confidential !== undefined);
    if (task.confidential === undefined) return this.inner.createTask(task, firstEvent, options);
    const content = contentOf(task);
    const owner = ownerOf(task);
    const sealed = { sealed: this.sealState(owner, content), sealedRequest: this.sealRequest(owner, content) };
    const stored = await this.inner.createTask({ ...task, ...emptied(content, task.taskId, task.taskType), ...sealed }, firstEvent, options);
    this.remember(task.taskId, stored.version, content, owner);
    return { ...stored, ...content, sealed: undefined, sealedRequest: undefined };
  }

  async getTask(taskId: string): Promise<TaskRecord | undefined> {
    return this.opened(await this.inner.getTask(taskId));
  }

  async commit(taskId: string, expectedVersion: number, patch: TaskPatch, event?: StoredEvent, options?: CommitOptions): Promise<TaskRecord> {
    if (this.kinds.get(taskId) === false) return this.inner.commit(taskId, expectedVersion, patch, event, options);
    const touchesContent = CONTENT_FIELDS.some((field) => field in patch);
    const known = this.latest.get(taskId);
    let current = known?.version === expectedVersion ? known : undefined;
    if (current === undefined && touchesContent) {
      const record = await this.getTask(taskId); // reads it, opened, into `latest`
      if (record?.confidential !== undefined && record.version === expectedVersion) current = this.latest.get(taskId);
    }
    if (current === undefined) {
      const stored = await this.inner.commit(taskId, expectedVersion, patch, event, options);
      return this.opened(stored);
    }
    const content: Content = { ...current.content };
    for (const field of CONTENT_FIELDS) if (field in patch) (content as Record<string, unknown>)[field] = patch[field];
    const { owner } = current;
    // Only a patch that changes content seals it again; one of state, progress or lease alone leaves it as it is.
    const sealedPatch = touchesContent
      ? { ...patch, ...emptied(content, taskId, owner.taskType), sealed: this.sealState(owner, content), ...("request" in patch ? { sealedRequest: this.sealRequest(owner, content) } : {}) }
      : patch;
    const stored = await this.inner.commit(taskId, expectedVersion, sealedPatch, event, options);
    this.remember(taskId, stored.version, content, owner);
    return { ...stored, ...content, sealed: undefined, sealedRequest: undefined };
  }

  async listTasks(query: ListTasksQuery) {
    const page = await this.inner.listTasks(query);
    return { ...page, tasks: page.tasks.map((task) => this.opened(task)) };
  }

  async findTaskByIdempotencyKey(requesterAgentId: string, key: string) {
    return this.opened(await this.inner.findTaskByIdempotencyKey(requesterAgentId, key));
  }

  async listUnleased(...args: Parameters<TaskStore["listUnleased"]>) {
    return (await this.inner.listUnleased(...args)).map((task) => this.opened(task));
  }

  async listDecisionDeadlines(...args: Parameters<TaskStore["listDecisionDeadlines"]>) {
    return (await this.inner.listDecisionDeadlines(...args)).map((task) => this.opened(task));
  }

  /** Events with their sealed payloads opened (the envelope stays as it travelled). */
  async listEvents(taskId: string, fromSequence: number, limit?: number): Promise<StoredEvent[]> {
    const events = await this.inner.listEvents(taskId, fromSequence, limit);
    if (!events.some((event) => event.header.confidential !== undefined)) return events;
    const task = this.latest.get(taskId)?.owner ?? (await this.inner.getTask(taskId));
    if (task?.confidential === undefined) return events;
    const key = this.keys.of(task);
    return events.map((event) => openedEvent(event, key));
  }

  /** Pushed events of a task this agent requested, their sealed payloads opened with the key wrapped to itself. */
  async listOutboundEvents(executorAgentId: string, taskId: string, fromSequence: number): Promise<StoredEvent[]> {
    const events = await this.inner.listOutboundEvents(executorAgentId, taskId, fromSequence);
    if (!events.some((event) => event.header.confidential !== undefined)) return events;
    const task = await this.inner.getOutbound(executorAgentId, taskId);
    if (task?.confidential === undefined) return events;
    const key = this.keys.ofOutbound(task);
    return events.map((event) => openedEvent(event, key));
  }
}

function openedEvent(event: StoredEvent, key: Uint8Array): StoredEvent {
  if (event.header.confidential === undefined) return event;
  const { payload } = openSealedPayload(event.envelope.header, event.header, event.envelope.payload, key);
  return { ...event, payload: fromBinary(messageTypeInfo(event.header.messageType)!.payloadSchema, payload) };
}

const INTERCEPTED = new Set<PropertyKey>(["createTask", "getTask", "commit", "listTasks", "findTaskByIdempotencyKey", "listUnleased", "listDecisionDeadlines", "listEvents", "listOutboundEvents"]);

/** `inner`, with confidential tasks sealed at rest. */
export function sealedTaskStore(inner: TaskStore, keys: TaskKeys): TaskStore {
  const sealed = new SealedContent(inner, keys);
  const bound = new Map<PropertyKey, unknown>(); // each method bound once, not at every call
  return new Proxy(inner, {
    get(target, property) {
      const known = bound.get(property);
      if (known !== undefined) return known;
      const owner = INTERCEPTED.has(property) ? sealed : target;
      const value = Reflect.get(owner, property, owner) as unknown;
      if (typeof value !== "function") return value;
      const method = (value as (...args: unknown[]) => unknown).bind(owner);
      bound.set(property, method);
      return method;
    },
  });
}
