// gRPC health checking (grpc.health.v1): a serving status per service name
// ("" is the server as a whole), answered by Check and followed by Watch.
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter } from "@connectrpc/connect";
import { clip } from "../protocol/errors.js";
import { Health, HealthCheckResponse_ServingStatus as ServingStatus, HealthCheckResponseSchema } from "../../gen/grpc/health/v1/health_pb.js";
import { linkedSignal } from "../abort.js";

export { ServingStatus };

export class ServerHealth {
  readonly #statuses = new Map<string, ServingStatus>([["", ServingStatus.SERVING]]);
  readonly #listeners = new Set<() => void>();
  #shutDown = false;

  /**
   * Registers grpc.health.v1.Health on the router and reports every service
   * already on it, Health included, as SERVING: call it after the others.
   * Open Watch streams end with UNAVAILABLE once `ended` aborts, so they do
   * not hold up a graceful shutdown.
   */
  register(router: ConnectRouter, ended: AbortSignal): void {
    router.service(Health, {
      check: (request) => {
        const status = this.#statuses.get(request.service);
        if (status === undefined) throw new ConnectError(`unknown service ${clip(request.service)}`, Code.NotFound);
        return create(HealthCheckResponseSchema, { status });
      },
      watch: (request, ctx) => this.#watch(request.service, ctx.signal, ended),
    });
    for (const handler of router.handlers) this.set(handler.service.typeName, ServingStatus.SERVING);
  }

  /** Sets one service's status (ignored once shut down, as in grpc-go). */
  set(service: string, status: ServingStatus): void {
    if (this.#shutDown || this.#statuses.get(service) === status) return;
    this.#statuses.set(service, status);
    this.#notify();
  }

  get(service: string): ServingStatus | undefined {
    return this.#statuses.get(service);
  }

  /** Every known service, "" included, becomes NOT_SERVING for good; Watch streams see it at once. */
  shutdown(): void {
    this.#shutDown = true;
    for (const service of this.#statuses.keys()) this.#statuses.set(service, ServingStatus.NOT_SERVING);
    this.#notify();
  }

  async *#watch(service: string, callSignal: AbortSignal, ended: AbortSignal) {
    const { signal, release } = linkedSignal(callSignal, ended);
    let sent: ServingStatus | undefined;
    try {
      for (;;) {
        // A change is sent before an end is noticed: the last status reaches the client first.
        const status = this.#statuses.get(service) ?? ServingStatus.SERVICE_UNKNOWN;
        if (status !== sent) {
          sent = status;
          yield create(HealthCheckResponseSchema, { status });
          continue;
        }
        if (signal.aborted) break;
        await this.#nextChange(signal);
      }
    } finally {
      release();
    }
    if (ended.aborted && !callSignal.aborted) throw new ConnectError("server is shutting down", Code.Unavailable);
  }

  #notify(): void {
    for (const listener of [...this.#listeners]) listener();
  }

  /** Resolves at the next status change, or when the signal aborts. */
  #nextChange(signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        this.#listeners.delete(done);
        signal.removeEventListener("abort", done);
        resolve();
      };
      this.#listeners.add(done);
      signal.addEventListener("abort", done);
    });
  }
}
