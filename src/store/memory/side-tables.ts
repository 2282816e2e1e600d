// What the memory store keeps beside tasks: result bytes, the tasks this
// agent requested (their events as callbacks brought them) and the
// callback outbox. A requested task that has finished keeps its events as
// one packed buffer of their exact bytes, as a finished task does.
import type { TaskState } from "../../../gen/synapse/v1/payloads_pb.js";
import { isTerminal } from "../../protocol/state-machine.js";
import { envelopeBytes, eventFromBytes } from "../codec.js";
import { DeliveryStatus, StoreConflictError, type DeliveryPatch, type DeliveryRecord, type OutboundTask, type StoredEvent } from "../store.js";
import { ownBytes, packSections, section, sectionCount, type Allocate } from "./sections.js";

interface OutboundEntry {
  task: OutboundTask;
  /** Objects while the task runs; its events' bytes once it has finished. */
  events: StoredEvent[] | Buffer;
  updatedAtMs: number;
}

function outboundKey(executorAgentId: string, taskId: string): string {
  return `${executorAgentId}\u0000${taskId}`;
}

function unpackEvents(taskId: string, events: StoredEvent[] | Buffer): StoredEvent[] {
  if (Array.isArray(events)) return events;
  return Array.from({ length: sectionCount(events) }, (_, index) => eventFromBytes(taskId, index + 1, section(events, index)));
}

export class MemorySideTables {
  private readonly results = new Map<string, Uint8Array>();
  private readonly outbound = new Map<string, OutboundEntry>();
  private readonly deliveries = new Map<string, DeliveryRecord>();

  constructor(
    private readonly now: () => number,
    /** Where finished outbound tasks' events are packed. */
    private readonly allocate: Allocate,
  ) {}

  // ── results ────────────────────────────────────────────────────────────

  putResult(taskId: string, bytes: Uint8Array): void {
    this.results.set(taskId, ownBytes(bytes));
  }

  readResult(taskId: string, offset: number, length: number): Uint8Array {
    const bytes = this.results.get(taskId);
    if (bytes === undefined) throw new RangeError(`task ${taskId} has no result stream`);
    return bytes.subarray(offset, Math.min(bytes.byteLength, offset + length));
  }

  // ── tasks this agent requested ─────────────────────────────────────────

  expectOutbound(task: OutboundTask): void {
    const key = outboundKey(task.executorAgentId, task.taskId);
    if (!this.outbound.has(key)) this.outbound.set(key, { task, events: [], updatedAtMs: this.now() });
  }

  getOutbound(executorAgentId: string, taskId: string): OutboundTask | undefined {
    return this.outbound.get(outboundKey(executorAgentId, taskId))?.task;
  }

  appendOutboundEvent(executorAgentId: string, event: StoredEvent, state: TaskState): OutboundTask {
    const entry = this.outbound.get(outboundKey(executorAgentId, event.taskId));
    if (entry === undefined) throw new StoreConflictError("missing", `no outbound task ${event.taskId} at ${executorAgentId}`);
    if (event.sequence !== entry.task.lastSequence + 1) {
      throw new StoreConflictError("sequence", `event sequence ${event.sequence} does not follow ${entry.task.lastSequence}`);
    }
    const events = unpackEvents(event.taskId, entry.events);
    events.push(event);
    entry.task = { ...entry.task, state, lastSequence: event.sequence };
    entry.events = isTerminal(state) ? packSections(events.map((e) => envelopeBytes(e.envelope)), this.allocate) : events;
    entry.updatedAtMs = this.now();
    return entry.task;
  }

  listOutboundEvents(executorAgentId: string, taskId: string, fromSequence: number): StoredEvent[] {
    const entry = this.outbound.get(outboundKey(executorAgentId, taskId));
    if (entry === undefined) return [];
    if (Array.isArray(entry.events)) return entry.events.slice(Math.max(0, fromSequence - 1));
    const out: StoredEvent[] = [];
    for (let index = Math.max(0, fromSequence - 1); index < sectionCount(entry.events); index++) {
      out.push(eventFromBytes(taskId, index + 1, section(entry.events, index)));
    }
    return out;
  }

  // ── the callback outbox ────────────────────────────────────────────────

  startDelivery(taskId: string, url: string): void {
    this.deliveries.set(taskId, {
      taskId,
      url,
      nextSequence: 1,
      attempts: 0,
      nextAttemptAtMs: 0,
      status: DeliveryStatus.ACTIVE,
      lastError: "",
      owner: "",
      ownerUntilMs: 0,
    });
  }

  getDelivery(taskId: string): DeliveryRecord | undefined {
    return this.deliveries.get(taskId);
  }

  claimDeliveries(owner: string, nowMs: number, untilMs: number, limit: number, taskId?: string): DeliveryRecord[] {
    const claimed: DeliveryRecord[] = [];
    const candidates = taskId === undefined ? this.deliveries.values() : [this.deliveries.get(taskId)].filter((d) => d !== undefined);
    for (const delivery of candidates) {
      if (claimed.length >= limit) break;
      if (delivery.status !== DeliveryStatus.ACTIVE || delivery.nextAttemptAtMs > nowMs) continue;
      if (delivery.owner !== "" && delivery.owner !== owner && delivery.ownerUntilMs >= nowMs) continue;
      const next = { ...delivery, owner, ownerUntilMs: untilMs };
      this.deliveries.set(delivery.taskId, next);
      claimed.push(next);
    }
    return claimed;
  }

  updateDelivery(taskId: string, owner: string, patch: DeliveryPatch): boolean {
    const delivery = this.deliveries.get(taskId);
    if (delivery === undefined || delivery.owner !== owner) return false;
    const { release, ...fields } = patch;
    this.deliveries.set(taskId, { ...delivery, ...fields, ...(release ? { owner: "", ownerUntilMs: 0 } : {}) });
    return true;
  }

  renewDeliveries(owner: string, taskIds: readonly string[], untilMs: number): string[] {
    const held: string[] = [];
    for (const id of taskIds) {
      const delivery = this.deliveries.get(id);
      if (delivery === undefined || delivery.owner !== owner) continue;
      this.deliveries.set(id, { ...delivery, ownerUntilMs: untilMs });
      held.push(id);
    }
    return held;
  }

  // ── retention ──────────────────────────────────────────────────────────

  /** Drops what belongs to a pruned task. */
  forgetTask(taskId: string): void {
    this.results.delete(taskId);
    this.deliveries.delete(taskId);
  }

  /** Drops finished outbound tasks last changed before `beforeMs`; at most `limit`. */
  pruneOutbound(beforeMs: number, limit: number): number {
    let dropped = 0;
    for (const [key, entry] of this.outbound) {
      if (dropped >= limit) break;
      if (isTerminal(entry.task.state) && entry.updatedAtMs < beforeMs) {
        this.outbound.delete(key);
        dropped++;
      }
    }
    return dropped;
  }
}
