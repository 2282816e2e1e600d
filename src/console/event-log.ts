// A task's signed events as the console shows them: each verified (signature,
// sender, receiver, sequence) and replayed through the state machine, so the
// path drawn is the one the executor's signatures prove. An event that does
// not verify is shown as such, and the path stops there: what follows it
// cannot be placed on a trusted path. No DOM here (Node tests replay logs).
import { timestampMs } from "@bufbuild/protobuf/wkt";
import type { Envelope } from "../../gen/synapse/v1/envelope_pb.js";
import { TaskState } from "../../gen/synapse/v1/payloads_pb.js";
import { stateAfterEvent } from "../protocol/event-state.js";
import { isTerminal, stateName } from "../protocol/state-machine.js";
import { verifyEnvelope, wireName, type Executor, type Expectations, type Verification } from "./envelopes.js";

export interface LogEntry {
  readonly sequence: bigint;
  readonly envelope: Envelope | undefined;
  readonly verification: Verification;
  /** The state this event led to, when it verified and the machine allows it. */
  readonly stateAfter: TaskState | undefined;
  /** Why the event is not on the path (it did not verify, or the step is illegal), if it is not. */
  readonly problem: string | undefined;
  /** When the executor signed it (ms since the epoch), from the header. */
  readonly sentAtMs: number | undefined;
}

/** A step of the path: the state reached, and the event that reached it (0 for the request). */
export interface PathStep {
  readonly state: TaskState;
  readonly sequence: bigint;
}

export class EventLog {
  readonly entries: LogEntry[] = [];
  /** From idle: the task_request made it pending; every verified event after that. */
  readonly path: PathStep[] = [
    { state: TaskState.IDLE, sequence: 0n },
    { state: TaskState.PENDING, sequence: 0n },
  ];
  /** The first event that broke the chain, if one did. */
  broken: { sequence: bigint; reason: string } | undefined;

  constructor(
    private readonly executor: Executor,
    /** Whom the events are addressed to: the task's requester. */
    private readonly receiver: string,
    readonly taskId: string,
  ) {}

  /** The state the verified events lead to. */
  get state(): TaskState {
    return this.path[this.path.length - 1]!.state;
  }

  /** The sequence the next event must carry. */
  get nextSequence(): bigint {
    return (this.entries[this.entries.length - 1]?.sequence ?? 0n) + 1n;
  }

  get allVerified(): boolean {
    return this.broken === undefined && this.entries.every((entry) => entry.verification.ok);
  }

  get finished(): boolean {
    return this.broken === undefined && isTerminal(this.state);
  }

  /** What every event of this log must be: from the executor, to the requester, of this task, at its sequence. */
  expectations(sequence: bigint): Expectations {
    return { executor: this.executor, receiver: this.receiver, taskId: this.taskId, sequence };
  }

  /**
   * Adds the event at `sequence`; one already held (a resumed stream
   * repeating it) is ignored. `checked` is its verification when the caller
   * made it (a sealed event, opened first), and `envelope` then the opened one.
   */
  add(sequence: bigint, envelope: Envelope | undefined, checked?: Verification): LogEntry | undefined {
    if (sequence < this.nextSequence) return undefined;
    const verification = checked ?? verifyEnvelope(envelope, this.expectations(sequence));
    const header = verification.header;
    const sentAtMs = header?.sentAt ? timestampMs(header.sentAt) : undefined;
    let stateAfter: TaskState | undefined;
    let problem: string | undefined;
    if (sequence !== this.nextSequence) {
      problem = `arrived where ${this.nextSequence} was due`;
    } else if (!verification.ok) {
      problem = verification.reason;
    } else if (this.broken !== undefined) {
      problem = `follows event ${this.broken.sequence}, which did not verify`;
    } else {
      stateAfter = stateAfterEvent(this.state, verification.type, verification.payload);
      if (stateAfter === undefined) problem = `${wireName(verification.type)} is not allowed after ${stateName(this.state)}`;
    }
    if (problem !== undefined && this.broken === undefined) this.broken = { sequence, reason: problem };
    const entry: LogEntry = { sequence, envelope, verification, stateAfter, problem, sentAtMs };
    this.entries.push(entry);
    if (stateAfter !== undefined && stateAfter !== this.state) this.path.push({ state: stateAfter, sequence });
    return entry;
  }

  /** The distinct states the path went through. */
  visited(): Set<TaskState> {
    return new Set(this.path.map((step) => step.state));
  }

  /** The steps taken, as "from>to" pairs. */
  steps(): Set<string> {
    const steps = new Set<string>();
    for (let i = 1; i < this.path.length; i++) steps.add(`${this.path[i - 1]!.state}>${this.path[i]!.state}`);
    return steps;
  }
}
