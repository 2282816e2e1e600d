// Uploads on the executor side: the limits an agent takes uploads under,
// the check that a task_request names only the requester's own uploads
// (at Send), and the files a handler reads, each verified against the hash
// the request signed before the handler sees a byte of it; a confidential
// task's files are sealed (docs/PROTOCOL.md §9.7) and opened as they are read.
import { ConnectError } from "@connectrpc/connect";
import { createHash } from "node:crypto";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import type { UploadReference } from "../../gen/synapse/v1/payloads_pb.js";
import { openedRecordsSize, openUploadStream } from "../envelope/confidential.js";
import { clip, protocolError } from "../protocol/errors.js";
import { isSha256Hex, readUploadChunks, type UploadRecord, type UploadStore } from "../store/uploads.js";
import { TaskFailure, type TaskUploads, type UploadedFile } from "./handler.js";
import { UploadRoom, type UploadRoomLimits } from "./upload-room.js";

/** Limits on files uploaded to an agent (`POST /upload`). */
export interface UploadLimits extends UploadRoomLimits {
  /** The largest single upload, in bytes (not bound by max_file_size: that is the point of uploads). */
  maxUploadBytes: number;
  /** What one sender's finished uploads may hold at once, in bytes, when a trust store or a trusted registry binds its key. */
  quotaBytes: number;
  /**
   * The same for a sender known only by first use (its key pinned when it
   * first spoke, or registered at a registry this agent hosts): anyone can
   * be one with a fresh key. At most `quotaBytes`.
   */
  firstUseQuotaBytes: number;
  /** Uploads no live task uses are dropped this long after their last use. */
  keepUnusedMs: number;
  /** Uploads one sender may have in progress at once. */
  maxConcurrentPerSender: number;
}

const MiB = 1024 * 1024;

export const DEFAULT_UPLOAD_LIMITS: Readonly<UploadLimits> = Object.freeze({
  maxUploadBytes: 1024 * MiB,
  quotaBytes: 1024 * MiB,
  firstUseQuotaBytes: 64 * MiB,
  totalBytes: 1024 * MiB,
  reserveBytes: 512 * MiB,
  keepUnusedMs: 24 * 60 * 60 * 1000,
  maxConcurrentPerSender: 4,
  maxConcurrent: 16,
});

/** How many files one task_request may name. */
export const MAX_UPLOADS_PER_TASK = 16;
const NAME = /^[A-Za-z0-9_.-]{1,64}$/;

export class AgentUploads {
  /** Room across every sender: the total, uploads at once, the disk's reserve. */
  readonly room: UploadRoom;

  constructor(
    readonly store: UploadStore,
    readonly limits: UploadLimits,
    private readonly now: () => number,
  ) {
    this.room = new UploadRoom(store, limits, now);
  }

  /** What a sender's finished uploads may hold: less for one known only by first use. */
  quotaFor(sender: { firstUse: boolean }): number {
    return sender.firstUse ? Math.min(this.limits.firstUseQuotaBytes, this.limits.quotaBytes) : this.limits.quotaBytes;
  }

  /**
   * Checks a task_request's references: well formed, and each one of the
   * requester's finished uploads with the size named; records that the task
   * uses them (so they are kept while it runs).
   */
  async admit(requesterAgentId: string, taskId: string, references: readonly UploadReference[]): Promise<void> {
    if (references.length === 0) return;
    if (references.length > MAX_UPLOADS_PER_TASK) throw protocolError(ErrorCode.INVALID_PARAMS, `a task may name at most ${MAX_UPLOADS_PER_TASK} uploads`);
    const names = new Set<string>();
    for (const reference of references) {
      if (!NAME.test(reference.name)) throw protocolError(ErrorCode.INVALID_PARAMS, `upload name ${JSON.stringify(clip(reference.name))} must be 1 to 64 of [A-Za-z0-9_.-]`);
      if (names.has(reference.name)) throw protocolError(ErrorCode.INVALID_PARAMS, `upload name ${reference.name} is used twice`);
      names.add(reference.name);
      if (!isSha256Hex(reference.sha256)) throw protocolError(ErrorCode.INVALID_PARAMS, `upload ${reference.name}: sha256 must be 64 lowercase hex characters`);
    }
    for (const reference of references) {
      const found = await this.store.getUpload(requesterAgentId, reference.sha256);
      // Another sender's upload is reported exactly as no upload: a hash alone grants nothing.
      if (found === undefined || BigInt(found.size) !== reference.size || !(await this.store.useUpload(requesterAgentId, reference.sha256, taskId, this.now()))) {
        throw protocolError(ErrorCode.UPLOAD_NOT_FOUND, `no upload ${reference.sha256} of ${reference.size} bytes from this sender (upload it with POST /upload first)`, {
          details: { name: reference.name, sha256: reference.sha256 },
        });
      }
    }
  }

  /** The files of a task, to verify before its handler runs; `taskKey` (a confidential task's) opens them. */
  forTask(requesterAgentId: string, references: readonly UploadReference[], taskKey?: Uint8Array): PreparedUploads {
    return new PreparedUploads(this.store, requesterAgentId, references, taskKey);
  }
}

const hex = (hash: ReturnType<typeof createHash>) => hash.digest("hex");

/** A task's uploads before the handler runs: verify() checks every byte against the signed hash. */
export class PreparedUploads {
  constructor(
    private readonly store: UploadStore | undefined,
    private readonly owner: string,
    private readonly references: readonly UploadReference[],
    /** A confidential task's key: its files are stored sealed, and the handler reads them opened. */
    private readonly taskKey?: Uint8Array,
  ) {}

  static none(): PreparedUploads {
    return new PreparedUploads(undefined, "", []);
  }

  /** No files to check: verify() settles at once. */
  get empty(): boolean {
    return this.references.length === 0;
  }

  /** Checks every file, stopping when `signal` aborts (none needed when there is nothing to check). */
  async verify(signal?: AbortSignal): Promise<TaskUploads> {
    const files: UploadedFile[] = [];
    const records = new Map<string, UploadRecord>();
    for (const reference of this.references) {
      const record = this.store === undefined ? undefined : await this.store.getUpload(this.owner, reference.sha256);
      if (record === undefined || this.store === undefined) {
        throw new TaskFailure(ErrorCode.UPLOAD_NOT_FOUND, `upload ${reference.name} (${reference.sha256}) is no longer stored`);
      }
      const hash = createHash("sha256");
      let size = 0;
      for await (const chunk of readUploadChunks(this.store, record)) {
        if (signal?.aborted) throw signal.reason;
        hash.update(chunk);
        size += chunk.byteLength;
      }
      if (hex(hash) !== reference.sha256 || BigInt(size) !== reference.size) {
        throw mismatch(reference.name);
      }
      records.set(reference.name, record);
      // A sealed file's handler sees the size of what it reads: the plaintext's.
      const plainSize = this.taskKey === undefined ? size : openedRecordsSize(size);
      if (plainSize < 0) throw new TaskFailure(ErrorCode.DECRYPTION_FAILED, `upload ${reference.name} is too short to be a sealed file`);
      files.push({ name: reference.name, sha256: reference.sha256, size: plainSize, contentType: record.contentType, fileName: record.fileName });
    }
    const store = this.store;
    const taskKey = this.taskKey;
    return {
      files,
      get: (name) => files.find((file) => file.name === name),
      open: (name) => {
        const record = records.get(name);
        if (record === undefined || store === undefined) throw new TaskFailure(ErrorCode.INVALID_PARAMS, `the task names no upload ${JSON.stringify(name)}`);
        return taskKey === undefined ? rehashed(store, record, name) : opened(taskKey, name, rehashed(store, record, name));
      },
    };
  }
}

function mismatch(name: string): TaskFailure {
  return new TaskFailure(ErrorCode.UPLOAD_MISMATCH, `upload ${name}: the stored bytes do not match the SHA-256 and size the request signed`);
}

/** The bytes again, hashed on the way: the store must not change them between the check and the read. */
async function* rehashed(store: UploadStore, record: UploadRecord, name: string): AsyncGenerator<Uint8Array> {
  const hash = createHash("sha256");
  let size = 0;
  for await (const chunk of readUploadChunks(store, record)) {
    hash.update(chunk);
    size += chunk.byteLength;
    yield chunk;
  }
  if (hex(hash) !== record.sha256 || size !== record.size) throw mismatch(name);
}

/** A sealed file's plaintext, record by record; a record that does not open fails the task with decryption_failed. */
async function* opened(taskKey: Uint8Array, name: string, sealed: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  try {
    yield* openUploadStream(taskKey, name, sealed);
  } catch (error) {
    // Only the opening's refusals are ConnectErrors here; a store's or the hash check's failure passes as it is.
    if (error instanceof ConnectError) throw new TaskFailure(ErrorCode.DECRYPTION_FAILED, `upload ${name}: ${error.rawMessage}`);
    throw error;
  }
}
