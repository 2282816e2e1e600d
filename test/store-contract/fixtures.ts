// Records and signed events for the store contract suite, and the stores it
// runs against: memory, SQLite (a fresh file) and PostgreSQL (a fresh
// database, when a server is available).
import { create, equals, toBinary } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EnvelopeSchema, MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import {
  AckPayloadSchema,
  TaskNeedHumanPayloadSchema,
  TaskRequestPayloadSchema,
  TaskState,
  TaskStatusUpdatePayloadSchema,
} from "../../gen/synapse/v1/payloads_pb.js";
import { generateKey } from "../../src/crypto/keys.js";
import { seal } from "../../src/envelope/seal.js";
import { memoryStorage } from "../../src/store/memory/index.js";
import { postgresStorage } from "../../src/store/postgres/index.js";
import { sqliteStorage } from "../../src/store/sqlite/index.js";
import type { Storage } from "../../src/store/storage.js";
import type { NewTask, StoredEvent, StoredReply } from "../../src/store/store.js";
import { freshDatabase, postgresAvailable } from "../helpers/postgres.js";

const key = generateKey();
export const requester = { agentId: "requester", systemId: "sys", keyId: "k-req" };
export const executor = { agentId: "executor", systemId: "sys", keyId: key.keyId };

export function newTask(taskId: string, overrides: Partial<NewTask> = {}): NewTask {
  return {
    taskId,
    taskType: "text_analysis",
    requester,
    executor,
    state: TaskState.CONFIRMED,
    progress: 0,
    statusMessage: "",
    createdAtMs: 1_000,
    updatedAtMs: 1_000,
    request: create(TaskRequestPayloadSchema, { task: { id: taskId, type: "text_analysis", payload: { text: "hello" } } }),
    payload: { text: "hello", nested: { list: [1, "two", null, true] } },
    idempotencyKey: "",
    requestMessageId: `m-${taskId}`,
    executionAttempts: 0,
    startedAtMs: 0,
    leaseOwner: "",
    leaseUntilMs: 0,
    answers: [],
    ...overrides,
  };
}

/** A real signed event (a status update) with the given sequence. */
export function signedEvent(taskId: string, sequence: number, progress = sequence): StoredEvent {
  const payload = create(TaskStatusUpdatePayloadSchema, { taskId, status: TaskState.EXECUTING, progress, message: `step ${sequence}` });
  const { envelope, header } = seal(
    { messageType: MessageType.TASK_STATUS_UPDATE, payload, sender: executor, receiver: requester, taskId, sequence: BigInt(sequence), sentAtMs: 5_000 + sequence },
    key,
  );
  return { taskId, sequence, envelope, header, payload };
}

export function signedReply(replyTo: string): StoredReply {
  const payload = create(AckPayloadSchema, { acknowledgedMessageId: replyTo, message: "ok" });
  const { envelope, header } = seal({ messageType: MessageType.ACK, payload, sender: executor, receiver: requester, replyTo }, key);
  return { envelope, header, payload };
}

export function decisionWithDeadline(deadlineMs: number) {
  return create(TaskNeedHumanPayloadSchema, { decisionId: "d1", reason: { code: "approval", message: "ok?" }, deadline: timestampFromMs(deadlineMs) });
}

/** Whether two stored envelopes are the same bytes. */
export function sameEnvelope(a: StoredReply, b: StoredReply): boolean {
  return Buffer.from(toBinary(EnvelopeSchema, a.envelope)).equals(Buffer.from(toBinary(EnvelopeSchema, b.envelope))) && equals(EnvelopeSchema, a.envelope, b.envelope);
}

export interface StoreKind {
  name: "memory" | "memory-packed" | "sqlite" | "postgres";
  available: () => boolean;
  /** A fresh, empty storage. */
  open(): Promise<Storage>;
  /** The same storage opened again after close (durable stores only). */
  reopen?(): Promise<Storage>;
}

export function storeKinds(): StoreKind[] {
  let sqlitePath = "";
  let postgresUrl = "";
  return [
    { name: "memory", available: () => true, open: async () => memoryStorage() },
    // Finished tasks packed into bytes at their terminal commit, not after the newest few.
    { name: "memory-packed", available: () => true, open: async () => memoryStorage(undefined, { keepFinished: 0 }) },
    {
      name: "sqlite",
      available: () => true,
      async open() {
        sqlitePath = join(await mkdtemp(join(tmpdir(), "synapse-store-")), "synapse.db");
        return sqliteStorage(sqlitePath);
      },
      reopen: async () => sqliteStorage(sqlitePath),
    },
    {
      name: "postgres",
      available: postgresAvailable,
      async open() {
        postgresUrl = await freshDatabase();
        return postgresStorage(postgresUrl, { pollIntervalMs: 200 });
      },
      reopen: async () => postgresStorage(postgresUrl, { pollIntervalMs: 200 }),
    },
  ];
}
