// What every A2A binding offers the client: the A2A operations on the
// lf.a2a.v1 messages, whatever travels on the wire (JSON-RPC, REST, gRPC).
import type {
  CancelTaskRequest,
  GetTaskRequest,
  ListTasksRequest,
  ListTasksResponse,
  SendMessageRequest,
  SendMessageResponse,
  StreamResponse,
  SubscribeToTaskRequest,
  Task,
} from "../../../gen/lf/a2a/v1/a2a_pb.js";
import type { A2ABinding } from "./card.js";

/** Per call: the headers (A2A-Version, Authorization, ...) and an abort signal. */
export interface A2ACallOptions {
  headers: Record<string, string>;
  signal?: AbortSignal;
}

/** One binding of one agent interface. Failures are thrown as {@link A2AClientError}. */
export interface A2ATransport {
  readonly binding: A2ABinding;
  sendMessage(request: SendMessageRequest, options: A2ACallOptions): Promise<SendMessageResponse>;
  sendStreamingMessage(request: SendMessageRequest, options: A2ACallOptions): AsyncIterable<StreamResponse>;
  getTask(request: GetTaskRequest, options: A2ACallOptions): Promise<Task>;
  listTasks(request: ListTasksRequest, options: A2ACallOptions): Promise<ListTasksResponse>;
  cancelTask(request: CancelTaskRequest, options: A2ACallOptions): Promise<Task>;
  subscribeToTask(request: SubscribeToTaskRequest, options: A2ACallOptions): AsyncIterable<StreamResponse>;
}

/** The body of an answer as JSON, or undefined when it is not JSON. */
export async function jsonBody(response: Response): Promise<unknown> {
  const text = await response.text();
  if (text === "") return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** Whether an answer is an event stream. */
export function isEventStream(response: Response): boolean {
  return (response.headers.get("content-type") ?? "").toLowerCase().startsWith("text/event-stream");
}
