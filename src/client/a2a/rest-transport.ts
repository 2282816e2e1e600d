// The HTTP+JSON binding (A2A section 11): the specification's paths under
// the interface URL (and under /{tenant} when the interface names one),
// bodies and answers in ProtoJSON as application/a2a+json, errors as
// google.rpc.Status, streams as SSE whose data lines are bare StreamResponses.
import { fromJson, toJson, type DescMessage, type JsonValue, type MessageShape } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import {
  ListTasksResponseSchema,
  SendMessageRequestSchema,
  SendMessageResponseSchema,
  StreamResponseSchema,
  TaskSchema,
  TaskState,
  type CancelTaskRequest,
  type GetTaskRequest,
  type ListTasksRequest,
  type SendMessageRequest,
  type StreamResponse,
  type SubscribeToTaskRequest,
} from "../../../gen/lf/a2a/v1/a2a_pb.js";
import { A2AClientError, asClientError, fromRestError } from "./errors.js";
import { readSse } from "./sse.js";
import { isEventStream, jsonBody, type A2ACallOptions, type A2ATransport } from "./transport.js";

export const A2A_JSON = "application/a2a+json";
const parseOptions = { ignoreUnknownFields: true } as const;

export class RestTransport implements A2ATransport {
  readonly binding = "HTTP+JSON" as const;
  private readonly base: string;

  constructor(
    url: string,
    tenant: string,
    private readonly fetcher: typeof fetch = fetch,
  ) {
    const trimmed = url.replace(/\/+$/, "");
    this.base = tenant === "" ? trimmed : `${trimmed}/${encodeURIComponent(tenant)}`;
  }

  private async call(method: "GET" | "POST", path: string, body: JsonValue | undefined, options: A2ACallOptions, stream: boolean): Promise<Response> {
    let response: Response;
    try {
      response = await this.fetcher(`${this.base}${path}`, {
        method,
        headers: { ...options.headers, Accept: stream ? "text/event-stream" : A2A_JSON, ...(body === undefined ? {} : { "Content-Type": A2A_JSON }) },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: options.signal,
      });
    } catch (error) {
      throw asClientError(error, "HTTP+JSON");
    }
    if (!response.ok) throw fromRestError(response.status, await jsonBody(response).catch(() => undefined));
    return response;
  }

  private async unary<O extends DescMessage>(method: "GET" | "POST", path: string, body: JsonValue | undefined, output: O, options: A2ACallOptions): Promise<MessageShape<O>> {
    const response = await this.call(method, path, body, options, false);
    const answer = await jsonBody(response).catch((error: unknown) => {
      throw asClientError(error, "HTTP+JSON");
    });
    try {
      return fromJson(output, (answer ?? {}) as JsonValue, parseOptions);
    } catch (error) {
      throw new A2AClientError("InvalidAgentResponse", `the agent's answer is not a ${output.typeName}: ${(error as Error).message}`, { binding: "HTTP+JSON" });
    }
  }

  private async *streaming(method: "GET" | "POST", path: string, body: JsonValue | undefined, options: A2ACallOptions): AsyncGenerator<StreamResponse> {
    const response = await this.call(method, path, body, options, true);
    if (!isEventStream(response) || response.body === null) {
      await response.body?.cancel().catch(() => undefined);
      throw new A2AClientError("InvalidAgentResponse", "the agent answered a streaming call without an event stream", { binding: "HTTP+JSON" });
    }
    try {
      for await (const event of readSse(response.body)) {
        let json: unknown;
        try {
          json = JSON.parse(event.data);
        } catch {
          throw new A2AClientError("InvalidAgentResponse", "an event of the stream is not JSON", { binding: "HTTP+JSON" });
        }
        if (event.event === "error" || (typeof json === "object" && json !== null && "error" in json)) {
          const status = Number((json as { error?: { code?: unknown } }).error?.code);
          throw fromRestError(Number.isInteger(status) ? status : 500, json);
        }
        try {
          yield fromJson(StreamResponseSchema, json as JsonValue, parseOptions);
        } catch (error) {
          throw new A2AClientError("InvalidAgentResponse", `an event of the stream is not a StreamResponse: ${(error as Error).message}`, { binding: "HTTP+JSON" });
        }
      }
    } catch (error) {
      throw asClientError(error, "HTTP+JSON");
    }
  }

  sendMessage(request: SendMessageRequest, options: A2ACallOptions) {
    return this.unary("POST", "/message:send", toJson(SendMessageRequestSchema, request), SendMessageResponseSchema, options);
  }

  sendStreamingMessage(request: SendMessageRequest, options: A2ACallOptions) {
    return this.streaming("POST", "/message:stream", toJson(SendMessageRequestSchema, request), options);
  }

  getTask(request: GetTaskRequest, options: A2ACallOptions) {
    const query = new URLSearchParams();
    if (request.historyLength !== undefined) query.set("historyLength", String(request.historyLength));
    return this.unary("GET", `/tasks/${encodeURIComponent(request.id)}${suffix(query)}`, undefined, TaskSchema, options);
  }

  listTasks(request: ListTasksRequest, options: A2ACallOptions) {
    const query = new URLSearchParams();
    if (request.contextId) query.set("contextId", request.contextId);
    if (request.status !== TaskState.UNSPECIFIED) query.set("status", TaskState[request.status] ? `TASK_STATE_${TaskState[request.status]}` : String(request.status));
    if (request.pageSize !== undefined) query.set("pageSize", String(request.pageSize));
    if (request.pageToken) query.set("pageToken", request.pageToken);
    if (request.historyLength !== undefined) query.set("historyLength", String(request.historyLength));
    if (request.statusTimestampAfter !== undefined) query.set("statusTimestampAfter", timestampDate(request.statusTimestampAfter).toISOString());
    if (request.includeArtifacts !== undefined) query.set("includeArtifacts", String(request.includeArtifacts));
    return this.unary("GET", `/tasks${suffix(query)}`, undefined, ListTasksResponseSchema, options);
  }

  cancelTask(request: CancelTaskRequest, options: A2ACallOptions) {
    const body: JsonValue = request.metadata === undefined ? {} : { metadata: request.metadata };
    return this.unary("POST", `/tasks/${encodeURIComponent(request.id)}:cancel`, body, TaskSchema, options);
  }

  subscribeToTask(request: SubscribeToTaskRequest, options: A2ACallOptions) {
    return this.streaming("GET", `/tasks/${encodeURIComponent(request.id)}:subscribe`, undefined, options);
  }
}

function suffix(query: URLSearchParams): string {
  const text = query.toString();
  return text === "" ? "" : `?${text}`;
}
