// Finished work kept as bytes. A live task is read and committed often, so
// the memory store keeps it as objects; once it is terminal it is read
// rarely and never changes, and its decoded objects (the request's Struct,
// the result's Value tree, each event's envelope, header and payload, and
// their many small buffers) cost several times their encoded size. So a
// finished task becomes one buffer: its row as the SQL stores write it
// (codec.ts, packed-row.ts), then the exact bytes of each signed event,
// decoded again on read. The signed bytes are copied as they are, never
// re-encoded, so signatures hold.
import type { TaskState } from "../../../gen/synapse/v1/payloads_pb.js";
import { envelopeBytes, eventFromBytes, taskFromRow, taskRow } from "../codec.js";
import type { StoredEvent, TaskRecord } from "../store.js";
import { rowBytes, rowFrom } from "./packed-row.js";
import { packSections, section, sectionCount, type Allocate } from "./sections.js";

/**
 * Strings many packed tasks hold alike (who asked, the task type), held once. Bounded: past
 * MAX_NAMES it starts again, costing only a copy per task, as without it.
 */
export class Names {
  private static readonly MAX_NAMES = 1024;
  private readonly names = new Map<string, string>();

  intern(name: string): string {
    const known = this.names.get(name);
    if (known !== undefined) return known;
    if (this.names.size >= Names.MAX_NAMES) this.names.clear();
    this.names.set(name, name);
    return name;
  }
}

/**
 * A terminal task as one buffer: section 0 its row, section n its event n.
 * What listing, counting and pruning look at stays outside, readable
 * without decoding; so do the lease fields, which a run ending releases
 * after the task has finished. The buffer is kept as where it lies in its
 * slab rather than as a Buffer: a view object per task costs as much as
 * the rest of this one.
 */
export class PackedTask {
  constructor(
    readonly taskId: string,
    readonly taskType: string,
    readonly requesterAgentId: string,
    readonly state: TaskState,
    readonly createdAtMs: number,
    readonly updatedAtMs: number,
    readonly idempotencyKey: string,
    public leaseOwner: string,
    public leaseUntilMs: number,
    private readonly memory: ArrayBufferLike,
    private readonly offset: number,
    private readonly length: number,
  ) {}

  static pack(task: TaskRecord, events: readonly StoredEvent[], allocate: Allocate, names: Names): PackedTask {
    const signed = events.map((event) => envelopeBytes(event.envelope));
    const row = rowBytes(taskRow(task), signed.at(-1));
    const bytes = packSections([row, ...signed], allocate);
    return new PackedTask(
      task.taskId,
      names.intern(task.taskType),
      names.intern(task.requester.agentId),
      task.state,
      task.createdAtMs,
      task.updatedAtMs,
      task.idempotencyKey,
      task.leaseOwner,
      task.leaseUntilMs,
      bytes.buffer,
      bytes.byteOffset,
      bytes.byteLength,
    );
  }

  /** The packed bytes (a view). */
  get bytes(): Buffer {
    return Buffer.from(this.memory, this.offset, this.length);
  }

  record(): TaskRecord {
    const bytes = this.bytes;
    const count = sectionCount(bytes) - 1;
    const task = taskFromRow(rowFrom(section(bytes, 0), count > 0 ? section(bytes, count) : undefined));
    return { ...task, leaseOwner: this.leaseOwner, leaseUntilMs: this.leaseUntilMs };
  }

  /** The exact bytes of event `sequence` (a view). */
  eventBytes(sequence: number): Buffer {
    return section(this.bytes, sequence);
  }

  /** Events from `fromSequence`, at most `limit`, decoded. */
  events(fromSequence: number, limit = Infinity): StoredEvent[] {
    const bytes = this.bytes;
    const out: StoredEvent[] = [];
    for (let sequence = Math.max(1, fromSequence); sequence < sectionCount(bytes) && out.length < limit; sequence++) {
      out.push(eventFromBytes(this.taskId, sequence, section(bytes, sequence)));
    }
    return out;
  }
}
