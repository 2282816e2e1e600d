// A server's metrics, in its own prom-client Registry (several servers in
// one process never share counts): RPCs by procedure, protocol and code
// with their latency; protocol messages by type and direction; refusals by
// protocol error code; state transitions; task lifetimes; tasks by state
// and open Watch streams (gauges); callback pushes; store commit latency.
// The process's own metrics (CPU, memory, event loop, GC) are kept once per
// process and shown by every server. docs/OBSERVABILITY.md lists them all.
import { collectDefaultMetrics, Gauge, Registry } from "prom-client";
import type { MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import type { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import { TaskState } from "../../gen/synapse/v1/payloads_pb.js";
import { protocolCodeName } from "../protocol/errors.js";
import { wireName } from "../protocol/message-types.js";
import { isTerminal, stateName } from "../protocol/state-machine.js";
import type { TaskRecord, TaskStore } from "../store/store.js";
import type { AgentObserver, CallbackOutcome, StoreOperation, StoreOutcome } from "./agent-observer.js";
import { CounterFamily, HistogramFamily, type HistogramCell } from "./cells.js";

export const METRICS_CONTENT_TYPE = Registry.PROMETHEUS_CONTENT_TYPE;

/** Task lifetimes: from ten milliseconds to a day (tasks that wait for people). */
const LIFETIME_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 14_400, 86_400];

const PROTOCOLS = ["grpc", "grpc-web", "connect"] as const;
export type RpcProtocol = (typeof PROTOCOLS)[number];

const STATES = Object.values(TaskState).filter((state): state is TaskState => typeof state === "number" && state !== TaskState.UNSPECIFIED);
const OPERATIONS: readonly StoreOperation[] = ["commit", "create_task"];
const OUTCOMES: readonly StoreOutcome[] = ["ok", "conflict", "error"];

let processRegistry: Registry | undefined;

/** The process's metrics, collected once per process whatever the number of servers. */
function processMetrics(): Registry {
  if (processRegistry === undefined) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

export class ServerMetrics {
  readonly registry = new Registry();
  private readonly rpcDuration = new HistogramFamily(
    "synapse_rpc_duration_seconds",
    "Time from a call's request to its last response byte, by procedure, protocol (grpc, grpc-web, connect) and code (ok, a gRPC code name, http_NNN when refused before the RPC ran, aborted when the client went away).",
  );
  private readonly rpcCells = new Map<string, Map<string, HistogramCell>[]>();
  private readonly refusals = new CounterFamily<string>(
    "synapse_refusals_total",
    "Calls refused with a synapse.v1.ErrorDetail, by procedure and protocol error code (signature_invalid, replay_detected, illegal_transition, ...): protocol violations and other refusals.",
    (key) => {
      const [procedure, code] = key.split(" ", 2) as [string, string];
      return { procedure, code };
    },
  );
  private readonly messages = new CounterFamily<number>(
    "synapse_messages_total",
    "Protocol messages by type (p2p:task_request, ...) and direction: received (verified and taken) or sent (signed by this agent: events once each, replies, heartbeats).",
    (key) => ({ type: wireName(Math.floor(key / 2) as MessageType), direction: key % 2 === 0 ? "received" : "sent" }),
  );
  private readonly transitions = new CounterFamily<number>(
    "synapse_task_transitions_total",
    "Committed task state changes, by the state left and the state entered.",
    (key) => ({ from: stateName(Math.floor(key / 32) as TaskState), to: stateName((key % 32) as TaskState) }),
  );
  private readonly lifetimes = new HistogramFamily<TaskState>(
    "synapse_task_lifetime_seconds",
    "Time from a task's creation to its terminal state, by that state (completed, failed, cancelled, rejected).",
    LIFETIME_BUCKETS,
    (state) => ({ state: stateName(state) }),
  );
  private readonly callbacks = new CounterFamily<CallbackOutcome>(
    "synapse_callback_pushes_total",
    "Callback pushes of task events to requesters' agents, by outcome: delivered (acknowledged), retried (a transient failure, tried again later), given_up (refused, or out of retries).",
    (outcome) => ({ outcome }),
  );
  private readonly storeWrites = new HistogramFamily<number>(
    "synapse_store_commit_duration_seconds",
    "Time a task store write took, by operation (commit: a state change with its event; create_task) and outcome (ok, conflict, error).",
    undefined,
    (key) => ({ operation: OPERATIONS[Math.floor(key / 3)]!, outcome: OUTCOMES[key % 3]! }),
  );
  private readonly watchStreams = new Gauge({ name: "synapse_watch_streams", help: "Streams of a task's events open now: P2PService.Watch calls and SSE event streams (GET /tasks/{id}/events).", registers: [] });

  /** What the agent reports, counted here. */
  readonly agentObserver: AgentObserver = {
    messageReceived: (type) => this.messages.inc(type * 2),
    messageSent: (type) => this.messages.inc(type * 2 + 1),
    transition: (from, to, task) => this.transition(from, to, task),
    callback: (outcome) => this.callbacks.inc(outcome),
    storeWrite: (operation, outcome, seconds) => this.storeWrites.cell(OPERATIONS.indexOf(operation) * 3 + OUTCOMES.indexOf(outcome)).observe(seconds),
    watchOpened: () => this.watchStreams.inc(),
    watchClosed: () => this.watchStreams.dec(),
  };

  constructor(store?: TaskStore) {
    this.rpcDuration.register(this.registry);
    this.rpcDuration.countsAs("synapse_rpc_requests_total", "Calls answered, by procedure, protocol and code (the count of synapse_rpc_duration_seconds).").register(this.registry);
    this.refusals.register(this.registry);
    this.messages.register(this.registry);
    this.transitions.register(this.registry);
    this.lifetimes.register(this.registry);
    this.callbacks.register(this.registry);
    this.storeWrites.register(this.registry);
    this.registry.registerMetric(this.watchStreams);
    if (store !== undefined) this.registry.registerMetric(tasksByState(store));
    if (store !== undefined) this.registry.registerMetric(storeUp(store));
    // Every series a dashboard shows exists from the start, at zero.
    for (const outcome of ["delivered", "retried", "given_up"] as const) this.callbacks.cell(outcome);
  }

  /** One call ended. `procedure` is the RPC's path; `outcome` an interned code name (see call-status.ts codeName). */
  rpc(procedure: string, protocol: RpcProtocol, outcome: string, seconds: number): void {
    let byProtocol = this.rpcCells.get(procedure);
    if (byProtocol === undefined) {
      byProtocol = PROTOCOLS.map(() => new Map<string, HistogramCell>());
      this.rpcCells.set(procedure, byProtocol);
    }
    const cells = byProtocol[protocol === "grpc" ? 0 : protocol === "grpc-web" ? 1 : 2]!;
    let cell = cells.get(outcome);
    if (cell === undefined) {
      cell = this.rpcDuration.create({ procedure: procedure.slice(1), protocol, code: outcome });
      cells.set(outcome, cell);
    }
    cell.observe(seconds);
  }

  /** A call was refused with an ErrorDetail carrying `code`. */
  refusal(procedure: string, code: ErrorCode): void {
    this.refusals.inc(`${procedure.slice(1)} ${protocolCodeName(code)}`);
  }

  private transition(from: TaskState, to: TaskState, task: TaskRecord): void {
    this.transitions.inc(from * 32 + to);
    if (isTerminal(to) && !isTerminal(from)) this.lifetimes.cell(to).observe(Math.max(0, task.updatedAtMs - task.createdAtMs) / 1000);
  }

  /** The Prometheus text: this server's metrics, then the process's. */
  async text(): Promise<string> {
    return `${await this.registry.metrics()}\n${await processMetrics().metrics()}`;
  }
}

/** 1 while the state store can be used, 0 while it cannot (its database unreachable); a store in this process is always 1. */
function storeUp(store: TaskStore): Gauge {
  return new Gauge({
    name: "synapse_store_up",
    help: "Whether the state store can be used now: 1 yes, 0 while its database is unreachable (calls that need it fail with UNAVAILABLE meanwhile).",
    registers: [],
    collect() {
      this.set(store.availability?.up === false ? 0 : 1);
    },
  });
}

/** A gauge of the tasks in each state, counted in the store at each scrape. */
function tasksByState(store: TaskStore): Gauge {
  return new Gauge({
    name: "synapse_tasks",
    help: "Tasks in the store by state, counted when scraped (finished tasks stay until --retention passes). Instances sharing a store each count all of it.",
    labelNames: ["state"],
    registers: [],
    async collect() {
      const counts = await Promise.all(STATES.map((state) => store.countTasks([state]).catch(() => undefined)));
      STATES.forEach((state, i) => {
        const count = counts[i];
        if (count !== undefined) this.set({ state: stateName(state) }, count);
      });
    },
  });
}
