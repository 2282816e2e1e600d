// Runs one task's handler: builds its TaskContext, enforces the task
// timeout and max_task_duration, checks the result against the output
// schema, and turns large or streamed results into a ResultStream. It talks
// to the engine only through ExecutionHost, so it never touches the store.
import { toBinary, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { createHash } from "node:crypto";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import type { Logger } from "../log.js";
import { taskLogFields } from "../observability/log-fields.js";
import { runningHandler } from "../observability/spans.js";
import { traceIdOf } from "../observability/trace-context.js";
import type { CarriedIds } from "../store/store.js";
import { toValue } from "../protocol/json-values.js";
import type { HumanAnswer, HumanQuestion, MissingFieldSpec, TaskContext, TaskHandler, TaskInput, TaskOutput, TaskTrace, TaskUploads } from "./handler.js";
import { RESULT_ARTIFACTS_KEY, RESULT_DIRECT_REPLY_KEY, TaskFailure } from "./handler.js";
import { artifactsJson } from "./result-artifacts.js";
import type { TaskSchemas } from "./schemas.js";
import { PreparedUploads } from "./uploads.js";

export interface FinishedResult {
  output?: JsonValue;
  outputType: string;
  summary: string;
  metadata?: JsonObject;
  stream?: { contentType: string; bytes: Uint8Array; sha256: Uint8Array };
}

export interface FailureReport {
  code: ErrorCode;
  message: string;
  recoverable: boolean;
  details?: JsonValue;
}

/** What an execution asks of the engine (which records it only while this instance still runs the task). */
export interface ExecutionHost {
  progress(taskId: string, percent: number, message: string, intermediate?: JsonValue): Promise<void>;
  askForInfo(execution: Execution, fields: MissingFieldSpec[], question: string | undefined): Promise<JsonObject>;
  askHuman(execution: Execution, question: HumanQuestion): Promise<HumanAnswer>;
  /** The task's current payload (with provided and modified fields merged in). */
  currentPayload(taskId: string): Promise<JsonObject>;
  /** Records the task's end; true when it did (that commit also gave up the run's lease), false when the task had already ended. */
  complete(taskId: string, result: FinishedResult): Promise<boolean>;
  fail(taskId: string, failure: FailureReport): Promise<boolean>;
}

export interface ExecutionLimits {
  /** When the task's first run started: the timeouts count from here, across restarts. */
  startedAtMs: number;
  taskTimeoutMs: number;
  maxTaskDurationMs: number;
  /** Outputs whose JSON is larger than this are offered as a stream instead. */
  maxInlineOutputBytes: number;
  /** The most bytes a result stream may hold. */
  maxStreamBytes: number;
}

/** Why an execution's signal was aborted. */
export class ExecutionStop extends Error {
  constructor(
    readonly failure: FailureReport | undefined,
    message: string,
  ) {
    super(message);
    this.name = "AbortError";
  }
}

async function collect(data: AsyncIterable<Uint8Array> | Uint8Array, limit: number, signal: AbortSignal): Promise<Uint8Array> {
  if (data instanceof Uint8Array) {
    if (data.byteLength > limit) throw new TaskFailure(ErrorCode.EXECUTION_FAILED, `result stream exceeds ${limit} bytes`);
    return data;
  }
  const parts: Uint8Array[] = [];
  let size = 0;
  for await (const part of data) {
    if (signal.aborted) throw signal.reason;
    size += part.byteLength;
    if (size > limit) throw new TaskFailure(ErrorCode.EXECUTION_FAILED, `result stream exceeds ${limit} bytes`);
    parts.push(part);
  }
  return Buffer.concat(parts);
}

/** Per JSON node, at most this many more bytes as a protobuf Value than as JSON (a number: 9-byte double, tags and lengths). */
const VALUE_OVERHEAD_PER_NODE = 16;

/** Whether a JSON value, `jsonBytes` long as JSON, fits in `limit` bytes as a google.protobuf.Value (how it travels signed). */
function fitsAsValue(value: JsonValue, jsonBytes: number, limit: number): boolean {
  // A cheap bound first; only outputs near the limit are encoded to measure them.
  if (jsonBytes + VALUE_OVERHEAD_PER_NODE * countNodes(value) <= limit) return true;
  return toBinary(ValueSchema, toValue(value)).byteLength <= limit;
}

function countNodes(value: JsonValue): number {
  if (Array.isArray(value)) return value.reduce((sum: number, item) => sum + countNodes(item), 1);
  if (value !== null && typeof value === "object") return Object.values(value).reduce((sum: number, item) => sum + countNodes(item as JsonValue), 1);
  return 1;
}

function sha256(bytes: Uint8Array): Uint8Array {
  return new Uint8Array(createHash("sha256").update(bytes).digest());
}

export class Execution {
  /** Why the run was stopped, once it is. */
  private stopped: ExecutionStop | undefined;
  // The signal a handler sees is made when something first asks for it: most
  // runs never stop and most handlers never read it, and an AbortSignal is
  // costly to make and, living as long as the run, to collect.
  private controller: AbortController | undefined;
  private readonly timers: NodeJS.Timeout[] = [];
  /** How far into the task's recorded answers this run has read (see TaskContext.attempt). */
  answerCursor = 0;
  /** Set once the handler is done and its outcome is being recorded: nothing is left to stop. */
  settling = false;
  /** The rejects of the races under way (the handler's run, a question it waits on). */
  private readonly racing = new Set<(reason: unknown) => void>();

  constructor(
    readonly input: TaskInput & { attempt: number },
    private readonly handler: TaskHandler,
    private readonly host: ExecutionHost,
    private readonly schemas: TaskSchemas,
    private readonly limits: ExecutionLimits,
    private readonly logger: Logger,
    private readonly uploads: PreparedUploads = PreparedUploads.none(),
    /** The task's trace, session and correlation ids. */
    private readonly carried?: CarriedIds,
  ) {}

  /** Aborted (with an ExecutionStop) when the run is stopped. */
  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (this.stopped !== undefined) this.controller.abort(this.stopped);
    }
    return this.controller.signal;
  }

  /** Stops the handler; `failure` says how the task ends (none when it already ended). */
  stop(failure: FailureReport | undefined, message: string): void {
    if (this.settling || this.stopped !== undefined) return;
    this.stopped = new ExecutionStop(failure, message);
    this.controller?.abort(this.stopped);
    this.stopRaces();
  }

  /**
   * Runs the handler and records how it ended (in a span of the task's trace,
   * when tracing); true when this run recorded the task's end, and with it
   * gave up its lease.
   */
  run(): Promise<boolean> {
    return runningHandler(this.input, this.carried, () => this.runHandler());
  }

  private async runHandler(): Promise<boolean> {
    const { taskId } = this.input;
    this.startTimers();
    try {
      // Every uploaded file is checked against its signed hash before the handler sees any of it.
      const uploads = this.uploads.empty ? await this.uploads.verify() : await this.race(this.uploads.verify(this.signal));
      const output = await this.race(this.handler.executeTask(this.context(uploads)));
      const result = await this.finish(output);
      if (this.stopped !== undefined) return this.reportStop();
      this.settling = true;
      return await this.host.complete(taskId, result);
    } catch (error) {
      if (this.stopped !== undefined) return this.reportStop();
      this.settling = true;
      return await this.host.fail(taskId, this.failureOf(error));
    } finally {
      for (const timer of this.timers) clearTimeout(timer);
    }
  }

  private startTimers(): void {
    const { taskTimeoutMs, maxTaskDurationMs } = this.limits;
    const elapsed = Math.max(0, Date.now() - this.limits.startedAtMs);
    // Whichever limit is shorter decides the error code the task fails with.
    if (taskTimeoutMs <= maxTaskDurationMs) {
      this.timers.push(
        setTimeout(
          () => this.stop({ code: ErrorCode.EXECUTION_TIMEOUT, message: `task ran past its ${taskTimeoutMs / 1000} s timeout`, recoverable: true }, "timeout"),
          Math.max(0, taskTimeoutMs - elapsed),
        ),
      );
    } else {
      this.timers.push(
        setTimeout(
          () =>
            this.stop(
              { code: ErrorCode.TASK_DURATION_EXCEEDED, message: `task ran past max_task_duration_seconds (${maxTaskDurationMs / 1000} s)`, recoverable: false },
              "duration exceeded",
            ),
          Math.max(0, maxTaskDurationMs - elapsed),
        ),
      );
    }
  }

  /** Settles as soon as the handler does, or as soon as the execution is stopped. */
  private race<T>(work: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (this.stopped !== undefined) return reject(this.stopped);
      // stop() rejects the races under way itself: no listener on a signal per race (EventTarget's are costly).
      this.racing.add(reject);
      work.then(
        (value) => {
          this.racing.delete(reject);
          resolve(value);
        },
        (error: unknown) => {
          this.racing.delete(reject);
          reject(error);
        },
      );
    });
  }

  private stopRaces(): void {
    for (const reject of this.racing) reject(this.stopped);
    this.racing.clear();
  }

  private async reportStop(): Promise<boolean> {
    const failure = this.stopped?.failure;
    this.settling = true;
    return failure !== undefined && (await this.host.fail(this.input.taskId, failure));
  }

  private context(uploads: TaskUploads): TaskContext {
    const { taskId } = this.input;
    const host = this.host;
    const carried = this.carried;
    const trace: TaskTrace = Object.freeze({
      traceparent: carried?.traceparent ?? "",
      tracestate: carried?.tracestate ?? "",
      traceId: traceIdOf(carried?.traceparent) ?? "",
      sessionId: carried?.sessionId ?? "",
      correlationId: carried?.correlationId ?? "",
    });
    const ctx: TaskContext = new RunContext(this, this.input, uploads, trace, () => this.logger.child(taskLogFields({ taskId, carried })), {
      progress: async (percent, message = "", intermediate) => {
        if (this.stopped !== undefined) throw this.stopped;
        const clamped = Math.max(0, Math.min(100, Math.round(percent)));
        await host.progress(taskId, clamped, message, intermediate);
      },
      askForInfo: async (fields, question) => {
        if (this.stopped !== undefined) throw this.stopped;
        const provided = await this.race(host.askForInfo(this, fields, question));
        ctx.payload = await host.currentPayload(taskId);
        return provided;
      },
      askHuman: async (question) => {
        if (this.stopped !== undefined) throw this.stopped;
        const answer = await this.race(host.askHuman(this, question));
        ctx.payload = await host.currentPayload(taskId);
        return answer;
      },
    });
    return ctx;
  }

  private async finish(output: TaskOutput): Promise<FinishedResult> {
    const { taskType } = this.input;
    let stream: FinishedResult["stream"];
    if (output.stream) {
      const bytes = await collect(output.stream.data, this.limits.maxStreamBytes, this.signal);
      stream = { contentType: output.stream.contentType, bytes, sha256: sha256(bytes) };
    }
    let inline = output.output;
    if (inline !== undefined) {
      const check = this.schemas.checkOutput(taskType, inline);
      if (!check.valid) {
        throw new TaskFailure(ErrorCode.OUTPUT_INVALID, `result does not match the output schema: ${check.problems.map((p) => p.message).join("; ")}`);
      }
      const json = Buffer.from(JSON.stringify(inline));
      // The signed task_complete carries it as a protobuf Value, which for numbers is larger than JSON: both must fit.
      if (json.byteLength > this.limits.maxInlineOutputBytes || !fitsAsValue(inline, json.byteLength, this.limits.maxInlineOutputBytes)) {
        // Too large for one message: offer the JSON as a stream instead.
        if (stream === undefined) stream = { contentType: "application/json", bytes: json, sha256: sha256(json) };
        inline = undefined;
      }
    }
    let metadata = output.metadata;
    if (output.artifacts !== undefined && output.artifacts.length > 0) {
      metadata = { ...metadata, [RESULT_ARTIFACTS_KEY]: artifactsJson(this.input.taskId, output.artifacts) };
      const size = Buffer.byteLength(JSON.stringify(metadata));
      if (size > this.limits.maxInlineOutputBytes) throw new TaskFailure(ErrorCode.OUTPUT_INVALID, `the result's artifacts take ${size} bytes, more than the ${this.limits.maxInlineOutputBytes} one message holds: return large files as a stream`);
    }
    if (output.directReply === true) metadata = { ...metadata, [RESULT_DIRECT_REPLY_KEY]: true };
    return {
      output: inline,
      outputType: output.outputType ?? "json",
      summary: output.summary ?? "",
      metadata,
      stream,
    };
  }

  private failureOf(error: unknown): FailureReport {
    if (error instanceof TaskFailure) {
      return { code: error.code, message: error.message, recoverable: error.recoverable, details: error.details };
    }
    const message = error instanceof Error ? error.message : String(error);
    this.logger.warn({ ...taskLogFields({ taskId: this.input.taskId, carried: this.carried }), err: error }, "handler failed");
    return { code: ErrorCode.EXECUTION_FAILED, message, recoverable: false };
  }
}

type ContextActions = Pick<TaskContext, "progress" | "askForInfo" | "askHuman">;

/**
 * The TaskContext a handler gets. `signal` and `logger` are getters on the
 * class, made when first read (most handlers read neither): getters written
 * in an object literal are new functions for every context, and V8 keeps an
 * object with accessors of its own in dictionary mode, every task.
 */
class RunContext implements TaskContext {
  readonly taskId: string;
  readonly taskType: string;
  readonly requester: TaskContext["requester"];
  readonly requestMessageId: string;
  readonly attempt: number;
  payload: JsonObject;
  readonly progress: ContextActions["progress"];
  readonly askForInfo: ContextActions["askForInfo"];
  readonly askHuman: ContextActions["askHuman"];
  readonly #run: Pick<Execution, "signal">;
  readonly #makeLogger: () => Logger;
  #logger: Logger | undefined;

  constructor(
    run: Pick<Execution, "signal">,
    input: Execution["input"],
    readonly uploads: TaskUploads,
    readonly trace: TaskTrace,
    makeLogger: () => Logger,
    actions: ContextActions,
  ) {
    this.taskId = input.taskId;
    this.taskType = input.taskType;
    this.requester = input.requester;
    this.requestMessageId = input.requestMessageId;
    this.attempt = input.attempt;
    this.payload = { ...input.payload };
    this.progress = actions.progress;
    this.askForInfo = actions.askForInfo;
    this.askHuman = actions.askHuman;
    this.#run = run;
    this.#makeLogger = makeLogger;
  }

  get signal(): AbortSignal {
    return this.#run.signal;
  }

  /** Made when a handler first logs: a child logger serializes its fields. */
  get logger(): Logger {
    return (this.#logger ??= this.#makeLogger());
  }
}
