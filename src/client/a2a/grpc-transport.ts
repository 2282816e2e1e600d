// The gRPC binding (A2A section 10) through Connect's gRPC transport and the
// generated lf.a2a.v1.A2AService; the service parameters travel as metadata.
import { createClient, type Client, type Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  A2AService,
  type CancelTaskRequest,
  type GetTaskRequest,
  type ListTasksRequest,
  type SendMessageRequest,
  type StreamResponse,
  type SubscribeToTaskRequest,
} from "../../../gen/lf/a2a/v1/a2a_pb.js";
import { asClientError } from "./errors.js";
import type { A2ACallOptions, A2ATransport } from "./transport.js";

/** A gRPC interface URL as a base URL: cards may give host:port without a scheme (plaintext then). */
export function grpcBaseUrl(url: string): string {
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(url) ? url : `http://${url}`;
}

export class GrpcTransport implements A2ATransport {
  readonly binding = "GRPC" as const;
  private readonly client: Client<typeof A2AService>;

  constructor(url: string, options: { transport?: Transport; ca?: string | Buffer } = {}) {
    const transport = options.transport ?? createGrpcTransport({ baseUrl: grpcBaseUrl(url), nodeOptions: options.ca ? { ca: options.ca } : undefined });
    this.client = createClient(A2AService, transport);
  }

  private async unary<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      throw asClientError(error, "GRPC");
    }
  }

  private async *streaming(open: () => AsyncIterable<StreamResponse>): AsyncGenerator<StreamResponse> {
    try {
      yield* open();
    } catch (error) {
      throw asClientError(error, "GRPC");
    }
  }

  sendMessage(request: SendMessageRequest, options: A2ACallOptions) {
    return this.unary(() => this.client.sendMessage(request, options));
  }

  sendStreamingMessage(request: SendMessageRequest, options: A2ACallOptions) {
    return this.streaming(() => this.client.sendStreamingMessage(request, options));
  }

  getTask(request: GetTaskRequest, options: A2ACallOptions) {
    return this.unary(() => this.client.getTask(request, options));
  }

  listTasks(request: ListTasksRequest, options: A2ACallOptions) {
    return this.unary(() => this.client.listTasks(request, options));
  }

  cancelTask(request: CancelTaskRequest, options: A2ACallOptions) {
    return this.unary(() => this.client.cancelTask(request, options));
  }

  subscribeToTask(request: SubscribeToTaskRequest, options: A2ACallOptions) {
    return this.streaming(() => this.client.subscribeToTask(request, options));
  }
}
