// A group's signed log as the console shows it: every a2n:group_event
// verified in this browser against the host's key (the agent serving the
// console, from GetCapabilities), addressed to the group and numbered
// without gaps. The entries are the task history's LogEntry, so the same
// rows (history.ts) show them. No DOM here.
import { timestampMs } from "@bufbuild/protobuf/wkt";
import type { GroupEventPayload } from "../../gen/synapse/v1/a2n_pb.js";
import { MessageType, type Envelope } from "../../gen/synapse/v1/envelope_pb.js";
import { verifyEnvelope, type Executor } from "./envelopes.js";
import type { LogEntry } from "./event-log.js";

export class GroupLog {
  readonly entries: LogEntry[] = [];
  /** The first event that did not verify or broke the numbering, if one did. */
  broken: { sequence: bigint; reason: string } | undefined;

  constructor(
    private readonly host: Executor,
    readonly groupId: string,
  ) {}

  /** The sequence the next event must carry: resume WatchGroup from here. */
  get nextSequence(): bigint {
    return (this.entries[this.entries.length - 1]?.sequence ?? 0n) + 1n;
  }

  get allVerified(): boolean {
    return this.broken === undefined && this.entries.every((entry) => entry.verification.ok);
  }

  /** Adds the event at `sequence`; one already held (a resumed stream repeating it) is ignored. */
  add(sequence: bigint, envelope: Envelope | undefined): { entry: LogEntry; payload: GroupEventPayload | undefined } | undefined {
    if (sequence < this.nextSequence) return undefined;
    const verification = verifyEnvelope(envelope, { executor: this.host, receiver: this.groupId, sequence });
    let problem: string | undefined;
    if (sequence !== this.nextSequence) problem = `arrived where ${this.nextSequence} was due`;
    else if (!verification.ok) problem = verification.reason;
    else if (verification.type !== MessageType.A2N_GROUP_EVENT) problem = "not an a2n:group_event";
    if (problem !== undefined && this.broken === undefined) this.broken = { sequence, reason: problem };
    const header = verification.header;
    const entry: LogEntry = { sequence, envelope, verification, stateAfter: undefined, problem, sentAtMs: header?.sentAt ? timestampMs(header.sentAt) : undefined };
    this.entries.push(entry);
    // Only a verified event's payload is acted on (it names what to re-read).
    const payload = problem === undefined && verification.ok ? (verification.payload as GroupEventPayload) : undefined;
    return { entry, payload };
  }
}
