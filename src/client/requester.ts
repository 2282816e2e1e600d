// The requester side: a typed client that seals and sends protocol
// messages, verifies every signed reply and event against the executor's
// key, resumes watches and result reads after a disconnect, and checks that
// what it is told follows the task state machine. Every message it seals
// carries W3C trace context: a new trace per submitted task (unless a span
// is active), the task's trace for the messages about it that follow; with
// an OpenTelemetry tracer installed, each send is a span of that trace.
import { create, type JsonObject, type Message } from "@bufbuild/protobuf";
import { durationFromMs, timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { readFile } from "node:fs/promises";
import { CapabilitiesService, type AgentCapabilities } from "../../gen/synapse/v1/capabilities_pb.js";
import { ConfidentialitySchema } from "../../gen/synapse/v1/confidential_pb.js";
import { MessageType, type Envelope } from "../../gen/synapse/v1/envelope_pb.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import { P2PService, type SendResponse, type Task, type TaskEvent } from "../../gen/synapse/v1/p2p_pb.js";
import {
  DecisionAction,
  HumanDecisionPayloadSchema,
  TaskAckPayloadSchema,
  TaskCancelPayloadSchema,
  TaskInfoProvidedPayloadSchema,
  TaskPriority,
  TaskRequestPayloadSchema,
  TaskState,
  type ResultStream,
} from "../../gen/synapse/v1/payloads_pb.js";
import { keyIdOf } from "../crypto/keys.js";
import { issueToken } from "../crypto/tokens.js";
import { open, type OpenedEnvelope } from "../envelope/open.js";
import { confidentialityOf, sealMessage, sealUpload, type ConfidentialSealing } from "../envelope/confidential.js";
import type { TrustPolicy } from "../envelope/trust.js";
import { PinnedKeys, TrustChain } from "../envelope/trust-sources.js";
import { stateAfterEvent } from "../protocol/event-state.js";
import { protocolError } from "../protocol/errors.js";
import { uuidV7 } from "../protocol/ids.js";
import { isTerminal, WAITING_STATES } from "../protocol/state-machine.js";
import { clientSending, type OutgoingTrace } from "../observability/spans.js";
import { freshTraceparent, traceFieldsOf, type TraceFields } from "../observability/trace-context.js";
import type { ClientOptions, ClientWatchItem, DecisionInput, EnvelopeExtras, SendResult, SubmitOptions, VerifiedMessage, WatchOptions } from "./requester-types.js";
import { RequesterKeys, withEventContent } from "./confidential.js";
import { impliedState, readStream, Resumption } from "./stream-reads.js";
import { RememberedTaskIds } from "./task-ids.js";
import { createTransport } from "./transport.js";
import { uploadFile, type UploadAnswer } from "./upload.js";

export type { ClientOptions, ClientWatchItem, DecisionInput, EnvelopeExtras, SendResult, SubmitOptions, VerifiedMessage, WatchOptions } from "./requester-types.js";

/** Lifetime of the tokens the client makes for its own reads. */
const TOKEN_LIFETIME_SECONDS = 180;

/**
 * A requester's client for one executor (the agent at one URL): seals and
 * sends protocol messages with the requester's key, verifies every signed
 * reply and event against the key the executor declared, resumes watches
 * and result reads after a dropped connection, and checks each event
 * against the task state machine. Make one with {@link SynapseClient.connect}.
 */
export class SynapseClient {
  /** The executor: its agent id, system id, and the key its replies and events are checked against. */
  readonly executor: { agentId: string; systemId: string; keyId: string; publicKey: Uint8Array };
  private readonly p2p: Client<typeof P2PService>;
  /** When a dropped stream (or a Send the server could not take) is tried again, and after how long. */
  private readonly resumption: Resumption;
  private readonly sendRetries: number;
  private cachedToken: { token: string; renewAtMs: number } | undefined;
  /** The trace, session and correlation ids of the tasks this client submitted (the latest ones). */
  private readonly taskIds = new RememberedTaskIds();
  /** The keys of its confidential tasks. */
  private readonly sealedTasks: RequesterKeys;

  private constructor(
    private readonly options: ClientOptions,
    /** The executor's declared capabilities (task types, limits), as it answered GetCapabilities. */
    readonly capabilities: AgentCapabilities,
    private readonly trust: TrustPolicy,
  ) {
    this.executor = {
      agentId: capabilities.agentId,
      systemId: capabilities.systemId,
      keyId: capabilities.keyId,
      publicKey: capabilities.publicKey,
    };
    this.p2p = createClient(P2PService, options.rpcTransport ?? createTransport(options.baseUrl, options.transport));
    this.resumption = new Resumption(options.maxRetries ?? 5, options.retryBaseDelayMs ?? 500);
    this.sendRetries = options.sendRetries ?? 3;
    this.sealedTasks = new RequesterKeys({ agentId: options.identity.agentId, keyId: options.identity.key.keyId }, options.identity.encryption);
  }

  /** Learns the executor's identity (GetCapabilities) and checks its key against the trust policy. */
  static async connect(options: ClientOptions): Promise<SynapseClient> {
    const transport = options.rpcTransport ?? createTransport(options.baseUrl, options.transport);
    const capabilities = (await createClient(CapabilitiesService, transport).getCapabilities({}, { timeoutMs: options.connectTimeoutMs })).capabilities;
    if (capabilities === undefined || capabilities.publicKey.byteLength !== 32) {
      throw protocolError(ErrorCode.MESSAGE_FORMAT_INVALID, `${options.baseUrl} did not declare an agent identity`);
    }
    if (keyIdOf(capabilities.publicKey) !== capabilities.keyId) {
      throw protocolError(ErrorCode.SIGNATURE_INVALID, `${options.baseUrl} declares a key id that does not match its public key`);
    }
    // The executor is the agent at the URL the caller chose: its id may be pinned whatever its form.
    const base = options.trust ?? PinnedKeys.inMemory({ firstUse: "any" });
    // The declared key is what replies will be checked against.
    const verdict = await base.check(capabilities.agentId, capabilities.keyId, capabilities.publicKey);
    if (verdict.kind === "conflict") {
      throw protocolError(ErrorCode.UNKNOWN_SENDER, `agent ${capabilities.agentId} now declares key ${capabilities.keyId}, but ${verdict.expectedKeyId} is trusted for it`);
    }
    if (verdict.kind === "unknown") throw protocolError(ErrorCode.UNKNOWN_SENDER, `agent ${capabilities.agentId} is not trusted`);
    await base.accepted?.(capabilities.agentId, capabilities.keyId, capabilities.publicKey);
    const declared: TrustPolicy = {
      publicKeyFor: (keyId) => (keyId === capabilities.keyId ? capabilities.publicKey : undefined),
      check: (agentId, keyId) =>
        agentId === capabilities.agentId && keyId === capabilities.keyId ? { kind: "trusted" } : { kind: "unknown" },
    };
    return new SynapseClient(options, capabilities, new TrustChain([declared]));
  }

  /** This requester's agent id. */
  get agentId(): string {
    return this.options.identity.agentId;
  }

  private get me() {
    return { agentId: this.options.identity.agentId, systemId: this.options.identity.systemId };
  }

  /** A bearer token for GetTask, ListTasks, Watch and ReadResult (at most 5 minutes). */
  token(lifetimeSeconds = 300): Promise<string> {
    return issueToken(this.options.identity.key, { agentId: this.options.identity.agentId, audience: this.executor.agentId, lifetimeSeconds });
  }

  /** One token serves every read until a minute before it expires. */
  private async authHeaders(): Promise<Record<string, string>> {
    if (this.cachedToken === undefined || Date.now() > this.cachedToken.renewAtMs) {
      this.cachedToken = { token: await this.token(TOKEN_LIFETIME_SECONDS), renewAtMs: Date.now() + (TOKEN_LIFETIME_SECONDS - 60) * 1000 };
    }
    return { Authorization: `Bearer ${this.cachedToken.token}` };
  }

  /** Seals a message to the executor, with trace context and the task's ids ({@link EnvelopeExtras}). */
  envelope(type: MessageType, payload: Message, extra: EnvelopeExtras = {}): Envelope {
    // Every message about a confidential task is sealed with its key (docs/PROTOCOL.md §9).
    return this.sealed(type, payload, extra, extra.taskId === undefined ? undefined : this.sealedTasks.sealingFor(extra.taskId));
  }

  /** envelope(), sealed as `sealing` says (a confidential task_request carries its wrapped keys), or plain. */
  private sealed(type: MessageType, payload: Message, extra: EnvelopeExtras, sealing: ConfidentialSealing | undefined): Envelope {
    const known = this.taskIds.get(extra.taskId);
    const trace = extra.traceparent ? extra : this.traceFor(known);
    return sealMessage(
      {
        messageType: type,
        payload,
        sender: this.me,
        receiver: this.executor,
        ...extra,
        sessionId: extra.sessionId ?? known?.sessionId,
        correlationId: extra.correlationId ?? known?.correlationId,
        traceparent: trace.traceparent,
        tracestate: trace.tracestate,
      },
      this.options.identity.key,
      sealing,
    ).envelope;
  }

  /** The trace a message sealed now belongs to, when the caller names none. */
  private traceFor(known: { trace: TraceFields } | undefined): TraceFields {
    const active = traceFieldsOf();
    if (active.traceparent) return active;
    return known?.trace ?? { traceparent: freshTraceparent() };
  }

  /** Seals and sends one message about a task, in its trace (a span of it when tracing); the reply is addressed to `receiver`. */
  private async sendTraced(type: MessageType, taskId: string, payload: Message, waitMs?: number, receiver?: string): Promise<SendResult> {
    await this.learnIfConfidential(taskId);
    return clientSending(type, taskId, this.taskIds.get(taskId)?.trace, (trace: OutgoingTrace) =>
      this.send(this.envelope(type, payload, { taskId, ...trace.fields }), waitMs, receiver, trace.headers),
    );
  }

  /**
   * Verifies a message the executor signed and addressed to this requester
   * (or, with `receiver`, to the task's requester: the events an escalation
   * contact reads are the requester's).
   */
  async verify(envelope: Envelope, options: { record?: boolean; receiver?: string } = {}): Promise<VerifiedMessage> {
    const opened: OpenedEnvelope = await open(envelope, {
      trust: this.trust,
      self: options.receiver ?? this.me.agentId,
      checkTime: !options.record,
      confidential: this.sealedTasks.opener((taskId) => this.storedTask(taskId)),
    });
    if (opened.header.sender?.agentId !== this.executor.agentId) {
      throw protocolError(ErrorCode.UNKNOWN_SENDER, `reply signed by ${opened.header.sender?.agentId}, not the executor ${this.executor.agentId}`);
    }
    return { envelope, header: opened.header, type: opened.header.messageType, payload: opened.payload };
  }

  /** Sends one sealed envelope and verifies the reply (addressed to `receiver`, by default this requester). */
  sendEnvelope(envelope: Envelope, waitMs?: number, receiver?: string): Promise<SendResult> {
    return this.send(envelope, waitMs, receiver);
  }

  /** sendEnvelope, with HTTP headers (the traceparent of a client span). */
  private async send(envelope: Envelope, waitMs: number | undefined, receiver: string | undefined, headers?: Record<string, string>): Promise<SendResult> {
    const request = { envelope, wait: waitMs === undefined ? undefined : durationFromMs(waitMs) };
    let response: SendResponse;
    for (let attempt = 1; ; attempt++) {
      try {
        response = await this.p2p.send(request, { headers });
        break;
      } catch (error) {
        // The same envelope again is safe: a processed one gets its stored reply, with no second effect (§5.3).
        const connectError = ConnectError.from(error);
        if (connectError.code !== Code.Unavailable || attempt > this.sendRetries) throw connectError;
        await this.resumption.backoff(attempt);
      }
    }
    // A reply that is a task event is addressed to the task's requester, who may be another agent for a contact.
    const reply = response.reply?.envelope ? await this.verify(response.reply.envelope, { receiver }) : undefined;
    return { reply, task: response.task };
  }

/**
   * Requests a task (p2p:task_request) and returns the executor's signed
   * reply (task_confirm, task_reject, or task_need_info when it asks first)
   * and the task. With `waitMs` the reply is held until the task ends or
   * waits for an answer, at most that long: submit and wait in one call.
   */
  async submit(taskType: string, payload: JsonObject, options: SubmitOptions = {}): Promise<SendResult & { taskId: string }> {
    const taskId = options.taskId ?? uuidV7();
    const request = create(TaskRequestPayloadSchema, {
      task: {
        id: taskId,
        type: taskType,
        priority: options.priority ?? TaskPriority.NORMAL,
        deadline: options.deadline ? timestampFromMs(options.deadline.getTime()) : undefined,
        payload,
      },
      context: { sessionId: options.sessionId ?? "", correlationId: options.correlationId ?? "", metadata: options.metadata, parentTaskId: options.parentTaskId ?? "" },
      callbackUrl: this.options.callback?.url ?? "",
      uploads: (options.uploads ?? []).map((upload) => ({ name: upload.name, sha256: upload.sha256, size: BigInt(upload.size) })),
    });
    // A confidential request carries the task key wrapped to the executor and to this requester.
    if (options.taskKey !== undefined) {
      if (!options.confidential) throw protocolError(ErrorCode.INVALID_PARAMS, "a task key is given only with confidential");
      this.sealedTasks.ahead(taskId, options.taskKey);
    }
    const sealing = options.confidential ? this.sealedTasks.forNewTask(taskId, this.capabilities) : undefined;
    // Expect the pushes before asking, so that not even the first one is refused; a confidential
    // task's pushes open at the callback agent with the key wrapped to it.
    await this.options.callback?.inbox.expect(this.executor, taskId, sealing === undefined ? undefined : create(ConfidentialitySchema, { ...confidentialityOf(sealing), nonce: new Uint8Array(0) }));
    // A new trace for the task, unless a span is active: the task's events will all carry it.
    const sent = await clientSending(MessageType.TASK_REQUEST, taskId, undefined, (trace) => {
      this.taskIds.remember(taskId, { trace: trace.fields, sessionId: options.sessionId, correlationId: options.correlationId });
      const envelope = this.sealed(
        MessageType.TASK_REQUEST,
        request,
        { taskId, idempotencyKey: options.idempotencyKey, sessionId: options.sessionId, correlationId: options.correlationId, ...trace.fields },
        sealing,
      );
      return this.send(envelope, options.waitMs, undefined, trace.headers);
    });
    return { taskId, ...sent };
  }

/** Cancels a task (p2p:task_cancel); the reply is the executor's signed task_ack. Only the task's requester may. */
  cancel(taskId: string, reason = "", waitMs?: number): Promise<SendResult> {
    const payload = create(TaskCancelPayloadSchema, { taskId, reason });
    return this.sendTraced(MessageType.TASK_CANCEL, taskId, payload, waitMs);
  }

/**
   * Answers a task's request for information (state `INFO_NEEDED`,
   * `task.pendingInfo` says what is missing): the fields are merged into its
   * payload and it goes on.
   */
  provideInfo(taskId: string, fields: JsonObject, options: { note?: string; waitMs?: number } = {}): Promise<SendResult> {
    const payload = create(TaskInfoProvidedPayloadSchema, { taskId, fields, note: options.note ?? "" });
    return this.sendTraced(MessageType.TASK_INFO_PROVIDED, taskId, payload, options.waitMs);
  }

  /**
   * Answers a task's request for a human decision (state `NEED_HUMAN`,
   * `task.pendingDecision` says what is asked): approve, modify or reject,
   * as the task's requester or as an escalation contact the decision names.
   */
  async decide(taskId: string, decision: DecisionInput, options: { waitMs?: number } = {}): Promise<SendResult> {
    const task = await this.getTask(taskId);
    const pending = task.pendingDecision;
    const action = { approve: DecisionAction.APPROVE, reject: DecisionAction.REJECT, modify: DecisionAction.MODIFY }[decision.action];
    const payload = create(HumanDecisionPayloadSchema, {
      taskId,
      decisionId: pending?.decisionId ?? "",
      decidedBy: { userId: decision.decidedBy?.userId ?? this.me.agentId, userName: decision.decidedBy?.userName ?? "", role: decision.decidedBy?.role ?? "" },
      decision: {
        action,
        approvedFields: decision.action === "approve" ? decision.fields : undefined,
        modifiedFields: decision.action === "modify" ? decision.fields : undefined,
        rejectionReason: decision.rejectionReason ?? "",
      },
      notes: decision.notes ?? "",
      timestamp: timestampFromMs(Date.now()),
    });
    const requester = task.requester?.agentId;
    return this.sendTraced(MessageType.HUMAN_DECISION, taskId, payload, options.waitMs, requester !== this.me.agentId ? requester : undefined);
  }

  /** Acknowledges a terminal outcome (or takes up a pending human decision). */
  acknowledge(taskId: string): Promise<SendResult> {
    const payload = create(TaskAckPayloadSchema, { taskId });
    return this.sendTraced(MessageType.TASK_ACK, taskId, payload);
  }

  /**
   * A task's current state (GetTask). A confidential task's view has no
   * content: its status line, question, decision, result and error are read
   * here from its sealed events, opened with the task's key.
   */
  async getTask(taskId: string): Promise<Task> {
    const task = await this.storedTask(taskId);
    if (task.confidential === undefined) return task;
    this.sealedTasks.learn(task);
    const events: VerifiedMessage[] = [];
    if (task.lastSequence > 0n) {
      // The latest event says what the task is at (its result, error, question or progress): read it alone,
      // and cancel the stream then rather than leave it waiting for more.
      const stop = new AbortController();
      try {
        for await (const item of this.watch(taskId, { signal: stop.signal, fromSequence: Number(task.lastSequence) })) {
          if (item.kind !== "event") continue;
          events.push(item.event);
          if (BigInt(item.sequence) >= task.lastSequence) break;
        }
      } finally {
        stop.abort();
      }
    }
    return withEventContent(task, events);
  }

  /** The task as the executor shows it (GetTask). */
  private async storedTask(taskId: string): Promise<Task> {
    const { task } = await this.p2p.getTask({ taskId }, { headers: await this.authHeaders() });
    if (task === undefined) throw protocolError(ErrorCode.TASK_NOT_FOUND, `no task ${taskId}`);
    return task;
  }

  /** A task this client did not submit may be confidential: its view says so, and gives its key (wrapped to this requester). */
  private async learnIfConfidential(taskId: string): Promise<void> {
    if (this.sealedTasks.has(taskId) || this.taskIds.get(taskId) !== undefined) return;
    const task = await this.storedTask(taskId).catch(() => undefined); // not visible: the message is refused as for any task
    if (task !== undefined) this.sealedTasks.learn(task);
  }

  /**
   * Uploads a file for a confidential task to name (docs/PROTOCOL.md §9.7):
   * makes the key of the task `taskId` now (or takes `taskKey`, made for it
   * earlier), seals the file with it as records under a key for `name`, and
   * uploads the sealed bytes; the file is read whole into memory to seal.
   * Then submit the task with the same `taskId`, `confidential: true` and
   * the answer in `uploads`: the request carries this key, and the executor
   * opens the file as its handler reads it. The answer's `sha256` and `size`
   * are the sealed bytes' (what the agent stores and checks); `taskKey` is
   * for a submit from another process (`SubmitOptions.taskKey`), to keep as
   * secret as the file.
   *
   * @example
   * ```ts
   * const taskId = uuidV7();
   * const csv = await client.uploadConfidential(taskId, "csv", { path: "accounts.csv", contentType: "text/csv" });
   * await client.submit("data_analysis", {}, { taskId, confidential: true, uploads: [csv] });
   * ```
   */
  async uploadConfidential(
    taskId: string,
    name: string,
    options: { path: string; contentType?: string; taskKey?: Uint8Array; signal?: AbortSignal },
  ): Promise<UploadAnswer & { name: string; taskKey: Uint8Array }> {
    const taskKey = this.sealedTasks.ahead(taskId, options.taskKey);
    const data = sealUpload(taskKey, name, await readFile(options.path));
    const answer = await uploadFile({ baseUrl: this.options.baseUrl, token: await this.token(), path: options.path, data, contentType: options.contentType, signal: options.signal, ca: this.options.transport?.ca });
    return { ...answer, name, taskKey };
  }

  /** The key of a confidential task of this requester's (from memory, or unwrapped from its view with this requester's key); undefined for a plain task. */
  async taskKey(taskId: string): Promise<Uint8Array | undefined> {
    return this.sealedTasks.key(taskId) ?? this.sealedTasks.learn(await this.storedTask(taskId));
  }

  /** Whether this client holds the key of a task it submitted confidential (or has read). */
  isConfidential(taskId: string): boolean {
    return this.sealedTasks.has(taskId);
  }

  /** This requester's tasks at the executor (all of them for an operator key), newest first, a page at a time (ListTasks), by state and task type. */
  async listTasks(options: { states?: TaskState[]; taskTypes?: string[]; pageSize?: number; pageToken?: string } = {}): Promise<{ tasks: Task[]; nextPageToken: string }> {
    return this.p2p.listTasks(
      { states: options.states ?? [], taskTypes: options.taskTypes ?? [], pageSize: options.pageSize ?? 0, pageToken: options.pageToken ?? "" },
      { headers: await this.authHeaders() },
    );
  }

  /**
   * Every event of a task, verified, in order, each with the state it leads
   * to; resumes from the next sequence after a dropped connection, so
   * nothing is lost or repeated. Ends after the terminal event.
   */
  async *watch(taskId: string, options: WatchOptions = {}): AsyncGenerator<ClientWatchItem> {
    let next = Math.max(1, options.fromSequence ?? 1);
    // Replaying from the start checks every step; starting midway, the first event is taken at its word.
    let state: TaskState | undefined = next === 1 ? TaskState.PENDING : undefined;
    let attempt = 0;
    let sawSnapshot = false;
    // The events are addressed to the task's requester: another agent when this one is an escalation contact.
    let receiver: string | undefined;
    for (;;) {
      try {
        const stream = this.p2p.watch({ taskId, fromSequence: BigInt(next) }, { headers: await this.authHeaders(), signal: options.signal });
        for await (const message of stream) {
          attempt = 0;
          if (message.kind.case === "snapshot") {
            const requester = message.kind.value.requester?.agentId;
            receiver = requester !== undefined && requester !== this.me.agentId ? requester : undefined;
            if (!sawSnapshot) yield { kind: "snapshot", task: message.kind.value };
            sawSnapshot = true;
          } else if (message.kind.case === "heartbeat") {
            yield { kind: "heartbeat", heartbeat: await this.verify(message.kind.value.envelope!) };
          } else if (message.kind.case === "event") {
            const checked = await this.checkEvent(message.kind.value, next, state, receiver);
            state = checked.state;
            next = checked.sequence + 1;
            yield checked;
            if (isTerminal(checked.state)) return;
          }
        }
        return; // the server ended the stream: the task was already over
      } catch (error) {
        const connectError = this.resumption.resumable(error, attempt, options.signal);
        attempt++;
        yield { kind: "reconnecting", attempt, fromSequence: next, error: connectError };
        await this.resumption.backoff(attempt);
      }
    }
  }

  private async checkEvent(event: TaskEvent, expected: number, state: TaskState | undefined, receiver: string | undefined): Promise<ClientWatchItem & { kind: "event" }> {
    const sequence = Number(event.sequence);
    if (sequence !== expected) throw protocolError(ErrorCode.MESSAGE_FORMAT_INVALID, `event ${sequence} arrived where ${expected} was due`);
    const verified = await this.verify(event.message!.envelope!, { record: true, receiver });
    if (Number(verified.header.sequence) !== sequence) {
      throw protocolError(ErrorCode.SIGNATURE_INVALID, `event ${sequence} is signed as sequence ${verified.header.sequence}`);
    }
    const next = state === undefined ? undefined : stateAfterEvent(state, verified.type, verified.payload);
    if (next === undefined) {
      // Resumed midway with no state to check against: take the event's own word for where it leads.
      if (state !== undefined) {
        throw protocolError(ErrorCode.ILLEGAL_TRANSITION, `event ${sequence} (${MessageType[verified.type]}) is not allowed after ${TaskState[state]}`);
      }
      return { kind: "event", sequence, event: verified, state: impliedState(verified) };
    }
    return { kind: "event", sequence, event: verified, state: next };
  }

  /**
   * Reads a task's result stream from `offset`, resuming after a dropped
   * connection, and checks total size and SHA-256 against `expected` (from
   * the signed task_complete) when given, else against the last chunk.
   */
  async readResult(taskId: string, options: { offset?: number; expected?: ResultStream; signal?: AbortSignal } = {}): Promise<Uint8Array> {
    const bytes = await readStream(async (offset) => this.p2p.readResult({ taskId, offset: BigInt(offset) }, { headers: await this.authHeaders(), signal: options.signal }), options, this.resumption);
    // A confidential task's stream is sealed records: the whole of it opens to the result (from offset 0 only).
    if ((options.offset ?? 0) === 0 && (this.sealedTasks.has(taskId) || this.sealedTasks.learn(await this.storedTask(taskId)) !== undefined)) {
      return this.sealedTasks.openResult(taskId, bytes);
    }
    return bytes;
  }

  /**
   * Watches until the task is terminal, or (with `untilInput`) until it
   * waits for information or a decision, and returns its state then.
   */
  async waitFor(taskId: string, options: { untilInput?: boolean; signal?: AbortSignal } = {}): Promise<Task> {
    const current = await this.getTask(taskId);
    if (isTerminal(current.state) || (options.untilInput && WAITING_STATES.has(current.state))) return current;
    for await (const item of this.watch(taskId, { signal: options.signal, fromSequence: Number(current.lastSequence) + 1 })) {
      if (item.kind === "event" && (isTerminal(item.state) || (options.untilInput && WAITING_STATES.has(item.state)))) break;
    }
    return this.getTask(taskId);
  }
}
