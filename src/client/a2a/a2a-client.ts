// A client for any A2A v1.0 agent: reads and checks its card, calls the
// interface chosen from it (gRPC, JSON-RPC or HTTP+JSON) with the A2A-Version
// header and a bearer token, and follows streams across dropped connections
// by resubscribing to the task.
import { create, fromJson, type JsonObject, type JsonValue, type MessageInitShape } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { createClient } from "@connectrpc/connect";
import { randomUUID } from "node:crypto";
import {
  ListTasksRequestSchema,
  MessageSchema,
  PartSchema,
  Role,
  SendMessageRequestSchema,
  StreamResponseSchema,
  TaskState,
  type AgentCard,
  type AgentInterface,
  type ListTasksResponse,
  type Message,
  type Part,
  type StreamResponse,
  type Task,
} from "../../../gen/lf/a2a/v1/a2a_pb.js";
import { CapabilitiesService } from "../../../gen/synapse/v1/capabilities_pb.js";
import type { AgentKey } from "../../crypto/keys.js";
import { issueToken } from "../../crypto/tokens.js";
import { createTransport } from "../transport.js";
import { A2A_VERSION, chooseInterface, readAgentCard, type A2ABinding } from "./card.js";
import type { CardKeyResolver, CardVerdict } from "./card-signature.js";
import { A2AClientError, asClientError } from "./errors.js";
import { GrpcTransport } from "./grpc-transport.js";
import { JsonRpcTransport } from "./jsonrpc-transport.js";
import { RestTransport } from "./rest-transport.js";
import type { A2ACallOptions, A2ATransport } from "./transport.js";

/** How the client authenticates: a bearer token the caller has, or one of our EdDSA tokens made from an agent key. */
export type A2AAuth =
  | {
      /** The token, or a function giving it for each call (to renew it). */
      token: string | (() => string | Promise<string>);
    }
  /** Tokens for `audience` (the agent id of the agent called; asked of its Synapse capabilities when omitted). */
  | { identity: { agentId: string; key: AgentKey }; audience?: string };

/** What {@link A2AClient.connect} needs: the agent's URL, and how to choose, authenticate and resume. */
export interface A2AClientOptions {
  /** The agent's URL: its base URL, or its card's URL. */
  url: string;
  /** Bindings in order of preference; default gRPC, JSON-RPC, HTTP+JSON. */
  bindings?: readonly A2ABinding[];
  auth?: A2AAuth;
  /** Keys trusted for the card's signatures (a same-origin `jku` is followed too). */
  cardKeys?: CardKeyResolver;
  /** Refuse a card that is unsigned or whose signature could not be checked. */
  requireSignedCard?: boolean;
  /** A2A extension URIs to ask for (the A2A-Extensions header). */
  extensions?: readonly string[];
  /** How many times a dropped stream is resumed with SubscribeToTask in a row; default 5. */
  maxResubscribes?: number;
  /** The first wait before resubscribing, doubled each time; default 250 ms. */
  resubscribeDelayMs?: number;
  /** The fetch the card, JSON-RPC and HTTP+JSON calls go through; default the global one. */
  fetch?: typeof fetch;
  /** Extra CA certificates (PEM) for https and gRPC over TLS. */
  ca?: string | Buffer;
}

/** A part of a message: text, a JSON value, or a file by URL or bytes. */
export type PartInput = string | MessageInitShape<typeof PartSchema>;

/** What a message to the agent carries besides its parts. */
export interface MessageInput {
  parts: readonly PartInput[];
  /** The task the message is about (a follow-up, such as an answer to input-required). */
  taskId?: string;
  contextId?: string;
  metadata?: JsonObject;
  referenceTaskIds?: string[];
  /** Default: a fresh UUID. The same id sent twice is the same message to an agent that deduplicates. */
  messageId?: string;
}

/** How SendMessage is asked: its configuration and metadata. */
export interface SendOptions {
  /** Answer as soon as the task exists instead of when it ends or is interrupted. */
  returnImmediately?: boolean;
  historyLength?: number;
  acceptedOutputModes?: string[];
  metadata?: JsonObject;
  signal?: AbortSignal;
}

/** ListTasks' filters and paging (the tenant is the interface's). */
export interface ListTasksFilter {
  contextId?: string;
  status?: TaskState;
  pageSize?: number;
  pageToken?: string;
  historyLength?: number;
  includeArtifacts?: boolean;
}

/** The answer to SendMessage: a task, or a direct message when the agent made no task. */
export interface SendResult {
  task?: Task;
  message?: Message;
}

const TERMINAL = new Set([TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELED, TaskState.REJECTED]);
const INTERRUPTED = new Set([TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED]);

/** Whether a task in this state has ended. */
export function isTerminalA2AState(state: TaskState): boolean {
  return TERMINAL.has(state);
}

/** Whether the agent is waiting for the client (input or authentication). */
export function isInterruptedA2AState(state: TaskState): boolean {
  return INTERRUPTED.has(state);
}

/** The task a stream event is about, when it names one. */
export function taskIdOf(event: StreamResponse): string | undefined {
  switch (event.payload.case) {
    case "task":
      return event.payload.value.id;
    case "statusUpdate":
    case "artifactUpdate":
      return event.payload.value.taskId;
    case "message":
      return event.payload.value.taskId || undefined;
    default:
      return undefined;
  }
}

/** The task state a stream event reports, when it reports one. */
export function stateOf(event: StreamResponse): TaskState | undefined {
  if (event.payload.case === "task") return event.payload.value.status?.state;
  if (event.payload.case === "statusUpdate") return event.payload.value.status?.state;
  return undefined;
}

/**
 * Whether the agent closes the stream after this event: a direct message, a
 * task that ended, or a status update that ends it or waits for the client.
 * (A follow-up's stream may begin with the task still input-required.)
 */
function endsStream(event: StreamResponse): boolean {
  if (event.payload.case === "message") return true;
  const state = stateOf(event);
  if (state === undefined) return false;
  return TERMINAL.has(state) || (event.payload.case === "statusUpdate" && INTERRUPTED.has(state));
}

/** A part from shorthand: a string is a text part. */
export function toPart(input: PartInput): Part {
  return typeof input === "string" ? create(PartSchema, { content: { case: "text", value: input } }) : create(PartSchema, input);
}

/** A data part carrying a JSON value. */
export function dataPart(value: JsonValue): MessageInitShape<typeof PartSchema> {
  return { content: { case: "data", value: fromJson(ValueSchema, value) }, mediaType: "application/json" };
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(signal.reason as Error);
    }, { once: true });
  });

/**
 * A client of one A2A v1.0 agent. Make one with {@link A2AClient.connect},
 * which reads the agent's card (checking its signature when it has one) and
 * chooses the interface to call.
 */
export class A2AClient {
  private cachedToken: { token: string; renewAtMs: number } | undefined;

  private constructor(
    private readonly options: A2AClientOptions,
    /** The agent's card as read. */
    readonly card: AgentCard,
    /** Where the card was read. */
    readonly cardUrl: string,
    /** What the check of the card's signatures found: verified, unsigned, or signed but not checkable. */
    readonly cardSignature: CardVerdict,
    /** The interface calls go to. */
    readonly endpoint: AgentInterface & { protocolBinding: A2ABinding },
    private readonly transport: A2ATransport,
    private readonly audience: string | undefined,
  ) {}

  /** Reads the card, checks it, and chooses the interface. */
  static async connect(options: A2AClientOptions): Promise<A2AClient> {
    const { card, cardUrl, signature } = await readAgentCard(options.url, { cardKeys: options.cardKeys, requireSignedCard: options.requireSignedCard, fetch: options.fetch });
    const endpoint = chooseInterface(card, options.bindings);
    const transport = A2AClient.transportFor(endpoint, options);
    let audience: string | undefined;
    if (options.auth !== undefined && "identity" in options.auth) {
      audience = options.auth.audience ?? (await synapseAgentIdAt(cardUrl));
      if (audience === undefined) {
        throw new A2AClientError("Unauthenticated", `tokens made from an agent key name the agent called, and ${cardUrl} does not say its agent id: give the audience`);
      }
    }
    return new A2AClient(options, card, cardUrl, signature, endpoint, transport, audience);
  }

  private static transportFor(endpoint: AgentInterface & { protocolBinding: A2ABinding }, options: A2AClientOptions): A2ATransport {
    switch (endpoint.protocolBinding) {
      case "GRPC":
        return new GrpcTransport(endpoint.url, { ca: options.ca });
      case "JSONRPC":
        return new JsonRpcTransport(endpoint.url, options.fetch);
      case "HTTP+JSON":
        return new RestTransport(endpoint.url, endpoint.tenant, options.fetch);
    }
  }

  /** The binding calls go over. */
  get binding(): A2ABinding {
    return this.endpoint.protocolBinding;
  }

  private async callOptions(signal?: AbortSignal): Promise<A2ACallOptions> {
    const headers: Record<string, string> = { "A2A-Version": A2A_VERSION };
    if (this.options.extensions?.length) headers["A2A-Extensions"] = this.options.extensions.join(",");
    const token = await this.bearer();
    if (token !== undefined) headers.Authorization = `Bearer ${token}`;
    return { headers, signal };
  }

  private async bearer(): Promise<string | undefined> {
    const auth = this.options.auth;
    if (auth === undefined) return undefined;
    if ("token" in auth) return typeof auth.token === "string" ? auth.token : await auth.token();
    if (this.cachedToken === undefined || Date.now() > this.cachedToken.renewAtMs) {
      const lifetime = 180;
      const token = await issueToken(auth.identity.key, { agentId: auth.identity.agentId, audience: this.audience!, lifetimeSeconds: lifetime });
      this.cachedToken = { token, renewAtMs: Date.now() + (lifetime - 60) * 1000 };
    }
    return this.cachedToken.token;
  }

  /** A user message with the interface's tenant, ready for SendMessage. */
  private request(input: MessageInput, options: SendOptions) {
    const message = create(MessageSchema, {
      messageId: input.messageId ?? randomUUID(),
      role: Role.USER,
      parts: input.parts.map(toPart),
      taskId: input.taskId ?? "",
      contextId: input.contextId ?? "",
      metadata: input.metadata,
      referenceTaskIds: input.referenceTaskIds ?? [],
    });
    return {
      tenant: this.endpoint.tenant,
      message,
      metadata: options.metadata,
      configuration: {
        returnImmediately: options.returnImmediately ?? false,
        historyLength: options.historyLength,
        acceptedOutputModes: options.acceptedOutputModes ?? [],
      },
    };
  }

  /** SendMessage: waits for the task to end or be interrupted, or with `returnImmediately` answers once it exists. */
  async sendMessage(input: MessageInput, options: SendOptions = {}): Promise<SendResult> {
    const response = await this.transport.sendMessage(create(SendMessageRequestSchema, this.request(input, options)), await this.callOptions(options.signal));
    if (response.payload.case === "task") return { task: response.payload.value };
    if (response.payload.case === "message") return { message: response.payload.value };
    throw new A2AClientError("InvalidAgentResponse", "the agent answered SendMessage with neither a task nor a message", { binding: this.binding });
  }

  /**
   * SendStreamingMessage: the task (or a direct message) first, then its
   * status and artifact updates, until it ends or is interrupted. A dropped
   * stream is resumed with SubscribeToTask (which starts with the task as it
   * is then), up to `maxResubscribes` times in a row.
   */
  sendStreamingMessage(input: MessageInput, options: SendOptions = {}): AsyncIterable<StreamResponse> {
    return this.follow(async (call) => this.transport.sendStreamingMessage(create(SendMessageRequestSchema, this.request(input, options)), call), undefined, options.signal);
  }

  /** A reply on a task: the answer to input-required (or any follow-up turn), in the task's context. */
  async reply(task: Pick<Task, "id" | "contextId">, parts: readonly PartInput[], options: SendOptions = {}): Promise<SendResult> {
    return this.sendMessage({ parts, taskId: task.id, contextId: task.contextId }, options);
  }

  /** SubscribeToTask: the task as it is, then its updates until it ends or is interrupted (resumed after drops like a stream). */
  subscribeToTask(taskId: string, options: { signal?: AbortSignal } = {}): AsyncIterable<StreamResponse> {
    return this.follow(async (call) => this.transport.subscribeToTask({ $typeName: "lf.a2a.v1.SubscribeToTaskRequest", id: taskId, tenant: this.endpoint.tenant }, call), taskId, options.signal);
  }

  /** GetTask: the task as it is now (with at most `historyLength` messages of history). */
  async getTask(taskId: string, options: { historyLength?: number; signal?: AbortSignal } = {}): Promise<Task> {
    return this.transport.getTask({ $typeName: "lf.a2a.v1.GetTaskRequest", id: taskId, tenant: this.endpoint.tenant, historyLength: options.historyLength }, await this.callOptions(options.signal));
  }

  /** ListTasks: the caller's tasks, filtered and paged. */
  async listTasks(request: ListTasksFilter = {}, options: { signal?: AbortSignal } = {}): Promise<ListTasksResponse> {
    return this.transport.listTasks(create(ListTasksRequestSchema, { ...request, tenant: this.endpoint.tenant }), await this.callOptions(options.signal));
  }

  /** CancelTask: the task as the cancel left it (TaskNotCancelable when it had ended). */
  async cancelTask(taskId: string, options: { metadata?: JsonObject; signal?: AbortSignal } = {}): Promise<Task> {
    return this.transport.cancelTask({ $typeName: "lf.a2a.v1.CancelTaskRequest", id: taskId, tenant: this.endpoint.tenant, metadata: options.metadata }, await this.callOptions(options.signal));
  }

  /** Yields a stream's events, resubscribing to its task after a drop; ends after an event that ends the stream. */
  private async *follow(open: (call: A2ACallOptions) => Promise<AsyncIterable<StreamResponse>>, knownTaskId: string | undefined, signal: AbortSignal | undefined): AsyncGenerator<StreamResponse> {
    const maxResubscribes = this.options.maxResubscribes ?? 5;
    const baseDelay = this.options.resubscribeDelayMs ?? 250;
    let taskId = knownTaskId;
    let source = open;
    let resubscribing = false;
    let lastState: TaskState | undefined;
    for (let attempt = 0; ; ) {
      let failure: A2AClientError | undefined;
      try {
        for await (const event of await source(await this.callOptions(signal))) {
          attempt = 0;
          taskId ??= taskIdOf(event);
          lastState = stateOf(event) ?? lastState;
          yield event;
          if (endsStream(event)) return;
        }
        // Closed by the agent where the task waits for the client: the stream is over, not dropped.
        if (lastState !== undefined && INTERRUPTED.has(lastState)) return;
      } catch (error) {
        failure = asClientError(error, this.binding);
        if (signal?.aborted) throw failure;
        // A resubscribe to a task that ended meanwhile: the task as it ended closes the stream.
        if (resubscribing && taskId !== undefined && failure.kind === "UnsupportedOperation") {
          yield create(StreamResponseSchema, { payload: { case: "task", value: await this.getTask(taskId, { signal }) } });
          return;
        }
        if (!failure.resumable || taskId === undefined) throw failure;
      }
      if (taskId === undefined) return;
      if (++attempt > maxResubscribes) {
        throw failure ?? new A2AClientError("Unavailable", `the stream of task ${taskId} kept closing before the task ended (${maxResubscribes} resubscribes)`, { binding: this.binding });
      }
      await sleep(baseDelay * 2 ** (attempt - 1), signal);
      const id = taskId;
      resubscribing = true;
      source = async (call) => this.transport.subscribeToTask({ $typeName: "lf.a2a.v1.SubscribeToTaskRequest", id, tenant: this.endpoint.tenant }, call);
    }
  }
}

/** The agent id a Synapse agent declares at this origin (GetCapabilities), or undefined when it is no Synapse agent. */
export async function synapseAgentIdAt(url: string): Promise<string | undefined> {
  try {
    const origin = new URL(url).origin;
    const { capabilities } = await createClient(CapabilitiesService, createTransport(origin)).getCapabilities({}, { timeoutMs: 5000 });
    return capabilities?.agentId || undefined;
  } catch {
    return undefined;
  }
}
