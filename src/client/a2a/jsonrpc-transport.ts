// The JSON-RPC 2.0 binding (A2A section 9): one POST per call to the
// interface URL, the method named as the RPC, params the request's
// ProtoJSON; the streaming methods answer with SSE whose every data line is
// a JSON-RPC response carrying a StreamResponse.
import { fromJson, toJson, type DescMessage, type JsonValue, type MessageShape } from "@bufbuild/protobuf";
import {
  CancelTaskRequestSchema,
  GetTaskRequestSchema,
  ListTasksRequestSchema,
  ListTasksResponseSchema,
  SendMessageRequestSchema,
  SendMessageResponseSchema,
  StreamResponseSchema,
  SubscribeToTaskRequestSchema,
  TaskSchema,
  type StreamResponse,
} from "../../../gen/lf/a2a/v1/a2a_pb.js";
import { A2AClientError, asClientError, fromJsonRpcError } from "./errors.js";
import { readSse } from "./sse.js";
import { isEventStream, jsonBody, type A2ACallOptions, type A2ATransport } from "./transport.js";

interface JsonRpcResponse {
  jsonrpc?: unknown;
  id?: unknown;
  result?: unknown;
  error?: { code?: unknown; message?: unknown; data?: unknown };
}

const parseOptions = { ignoreUnknownFields: true } as const;

export class JsonRpcTransport implements A2ATransport {
  readonly binding = "JSONRPC" as const;
  private nextId = 1;

  constructor(
    private readonly url: string,
    private readonly fetcher: typeof fetch = fetch,
  ) {}

  private post(method: string, params: JsonValue, options: A2ACallOptions, stream: boolean): Promise<{ response: Response; id: number }> {
    const id = this.nextId++;
    return this.fetcher(this.url, {
      method: "POST",
      headers: { ...options.headers, "Content-Type": "application/json", Accept: stream ? "text/event-stream" : "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id, method, params }),
      signal: options.signal,
    })
      .then((response) => ({ response, id }))
      .catch((error: unknown) => {
        throw asClientError(error, "JSONRPC");
      });
  }

  /** The result of one JSON-RPC answer, or the error it carries. */
  private static resultOf<Desc extends DescMessage>(schema: Desc, answer: unknown, status: number): MessageShape<Desc> {
    if (typeof answer !== "object" || answer === null) {
      throw new A2AClientError(status >= 500 ? "Internal" : "InvalidAgentResponse", `the agent answered HTTP ${status} without a JSON-RPC response`, { binding: "JSONRPC", code: status });
    }
    const rpc = answer as JsonRpcResponse;
    if (rpc.error !== undefined && rpc.error !== null) throw fromJsonRpcError(rpc.error);
    if (rpc.result === undefined) throw new A2AClientError("InvalidAgentResponse", "a JSON-RPC response with neither result nor error", { binding: "JSONRPC" });
    try {
      return fromJson(schema, rpc.result as JsonValue, parseOptions);
    } catch (error) {
      throw new A2AClientError("InvalidAgentResponse", `the agent's result is not a ${schema.typeName}: ${(error as Error).message}`, { binding: "JSONRPC" });
    }
  }

  private async unary<I extends DescMessage, O extends DescMessage>(method: string, input: I, request: MessageShape<I>, output: O, options: A2ACallOptions): Promise<MessageShape<O>> {
    const { response } = await this.post(method, toJson(input, request), options, false);
    const answer = await jsonBody(response).catch((error: unknown) => {
      throw asClientError(error, "JSONRPC");
    });
    return JsonRpcTransport.resultOf(output, answer, response.status);
  }

  private async *streaming<I extends DescMessage>(method: string, input: I, request: MessageShape<I>, options: A2ACallOptions): AsyncGenerator<StreamResponse> {
    const { response } = await this.post(method, toJson(input, request), options, true);
    if (!isEventStream(response) || response.body === null) {
      // An error before the stream began comes as one plain JSON-RPC response.
      JsonRpcTransport.resultOf(StreamResponseSchema, await jsonBody(response), response.status);
      throw new A2AClientError("InvalidAgentResponse", "the agent answered a streaming call without an event stream", { binding: "JSONRPC" });
    }
    try {
      for await (const event of readSse(response.body)) {
        let answer: unknown;
        try {
          answer = JSON.parse(event.data);
        } catch {
          throw new A2AClientError("InvalidAgentResponse", "an event of the stream is not JSON", { binding: "JSONRPC" });
        }
        yield JsonRpcTransport.resultOf(StreamResponseSchema, answer, response.status);
      }
    } catch (error) {
      throw asClientError(error, "JSONRPC");
    }
  }

  sendMessage(request: MessageShape<typeof SendMessageRequestSchema>, options: A2ACallOptions) {
    return this.unary("SendMessage", SendMessageRequestSchema, request, SendMessageResponseSchema, options);
  }

  sendStreamingMessage(request: MessageShape<typeof SendMessageRequestSchema>, options: A2ACallOptions) {
    return this.streaming("SendStreamingMessage", SendMessageRequestSchema, request, options);
  }

  getTask(request: MessageShape<typeof GetTaskRequestSchema>, options: A2ACallOptions) {
    return this.unary("GetTask", GetTaskRequestSchema, request, TaskSchema, options);
  }

  listTasks(request: MessageShape<typeof ListTasksRequestSchema>, options: A2ACallOptions) {
    return this.unary("ListTasks", ListTasksRequestSchema, request, ListTasksResponseSchema, options);
  }

  cancelTask(request: MessageShape<typeof CancelTaskRequestSchema>, options: A2ACallOptions) {
    return this.unary("CancelTask", CancelTaskRequestSchema, request, TaskSchema, options);
  }

  subscribeToTask(request: MessageShape<typeof SubscribeToTaskRequestSchema>, options: A2ACallOptions) {
    return this.streaming("SubscribeToTask", SubscribeToTaskRequestSchema, request, options);
  }
}
