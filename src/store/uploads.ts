// The UploadStore: files agents upload (POST /upload) before naming them in
// a task request. Bytes go to the store in chunks as they arrive, so no
// upload is ever held whole in memory; a finished upload is known by its
// uploader and SHA-256. Uploads that no live task uses are dropped after a
// period; each uploader's uploads are bounded by a quota, and everyone's
// together by a total, both checked in the commit that finishes an upload
// (so uploads from many senders at once cannot slip past the total).

/** A finished upload. */
export interface UploadRecord {
  /** The agent that uploaded it (the bearer token's subject). */
  readonly owner: string;
  /** SHA-256 of the bytes, lowercase hex. */
  readonly sha256: string;
  readonly size: number;
  readonly contentType: string;
  readonly fileName: string;
  readonly createdAtMs: number;
  /** The last time it was uploaded again or named by a task. */
  readonly lastUsedAtMs: number;
}

export interface UploadMeta {
  sha256: string;
  size: number;
  contentType: string;
  fileName: string;
  /** Refuse (UploadQuotaError) if the owner's finished uploads would then hold more bytes than this. */
  quotaBytes?: number;
  /** Refuse (UploadQuotaError, scope "total") if every owner's finished uploads together would then hold more bytes than this. */
  totalBytes?: number;
}

/** Bytes of one upload on their way into the store. */
export interface UploadWriter {
  /** Appends bytes; the store keeps them in chunks as they fill. */
  write(bytes: Uint8Array): Promise<void>;
  /**
   * Finishes the upload under (owner, sha256), checking the quota in the
   * same commit. An upload the owner already has is kept once: the new
   * bytes are dropped and the existing record returned.
   */
  commit(meta: UploadMeta): Promise<UploadRecord>;
  /** Drops everything written. */
  abort(): Promise<void>;
}

/** The owner's finished uploads (scope "sender"), or everyone's (scope "total"), would exceed their bound. */
export class UploadQuotaError extends Error {
  constructor(
    readonly usedBytes: number,
    readonly quotaBytes: number,
    readonly scope: "sender" | "total" = "sender",
  ) {
    super(`${scope === "total" ? "all uploads" : "uploads"} would hold ${usedBytes} bytes, the ${scope === "total" ? "total" : "quota"} is ${quotaBytes}`);
    this.name = "UploadQuotaError";
  }
}

/** The refusal, if any, of finishing an upload of `size` bytes: `owned` and `total` are what finished uploads hold now. */
export function quotaRefusal(meta: UploadMeta, owned: number, total: number): UploadQuotaError | undefined {
  if (meta.quotaBytes !== undefined && owned + meta.size > meta.quotaBytes) return new UploadQuotaError(owned + meta.size, meta.quotaBytes);
  if (meta.totalBytes !== undefined && total + meta.size > meta.totalBytes) return new UploadQuotaError(total + meta.size, meta.totalBytes, "total");
  return undefined;
}

export interface UploadStore {
  /** Starts an upload for `owner`. */
  beginUpload(owner: string, nowMs: number): Promise<UploadWriter>;
  getUpload(owner: string, sha256: string): Promise<UploadRecord | undefined>;
  /** Up to `length` bytes of a finished upload from `offset`; RangeError when there is none. */
  readUpload(owner: string, sha256: string, offset: number, length: number): Promise<Uint8Array>;
  /** Bytes the owner's finished uploads hold. */
  usage(owner: string): Promise<number>;
  /** Bytes every owner's finished uploads hold together. */
  totalUsage(): Promise<number>;
  /** Records that a task uses an upload (kept while the task is not terminal); false when there is no such upload. */
  useUpload(owner: string, sha256: string, taskId: string, nowMs: number): Promise<boolean>;
  /**
   * Drops finished uploads last used before `unusedBeforeMs` that no
   * non-terminal task uses, and unfinished ones begun before it; at most `limit`.
   */
  pruneUploads(unusedBeforeMs: number, limit: number): Promise<number>;
}

/** Stored chunk size: bytes are written and read back in pieces of this size. */
export const UPLOAD_CHUNK_BYTES = 256 * 1024;

/**
 * Collects written bytes into whole chunks, handing each to `flush` as it
 * fills. With `reuse`, every chunk is the same buffer, refilled: for a
 * store that copies what it is given before `flush` returns (it spares a
 * fresh allocation per chunk, which the garbage collector would free late).
 */
export class ChunkBuffer {
  private current: Buffer | undefined;
  private filled = 0;
  private next = 0;

  constructor(
    private readonly flush: (index: number, chunk: Uint8Array) => Promise<void> | void,
    private readonly options: { reuse?: boolean } = {},
  ) {}

  async write(bytes: Uint8Array): Promise<void> {
    let rest = bytes;
    while (rest.byteLength > 0) {
      this.current ??= Buffer.allocUnsafe(UPLOAD_CHUNK_BYTES);
      const take = Math.min(rest.byteLength, UPLOAD_CHUNK_BYTES - this.filled);
      this.current.set(rest.subarray(0, take), this.filled);
      this.filled += take;
      rest = rest.subarray(take);
      if (this.filled === UPLOAD_CHUNK_BYTES) await this.emit();
    }
  }

  /** Writes what is left as the last (short) chunk; returns how many chunks were written. */
  async end(): Promise<number> {
    if (this.filled > 0) await this.emit();
    return this.next;
  }

  private async emit(): Promise<void> {
    const chunk = this.current!.subarray(0, this.filled);
    if (!this.options.reuse) this.current = undefined;
    this.filled = 0;
    await this.flush(this.next++, chunk);
  }
}

/** Bytes [offset, offset + length) cut out of consecutive stored chunks starting at index `first`. */
export function sliceUploadChunks(chunks: readonly Uint8Array[], first: number, offset: number, length: number): Uint8Array {
  const joined = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
  const start = offset - first * UPLOAD_CHUNK_BYTES;
  return joined.subarray(start, Math.min(joined.byteLength, start + length));
}

/** A finished upload's bytes in order, chunk by chunk, straight from the store. */
export async function* readUploadChunks(store: UploadStore, upload: Pick<UploadRecord, "owner" | "sha256" | "size">): AsyncGenerator<Uint8Array> {
  for (let offset = 0; offset < upload.size; ) {
    const bytes = await store.readUpload(upload.owner, upload.sha256, offset, UPLOAD_CHUNK_BYTES);
    if (bytes.byteLength === 0) return;
    offset += bytes.byteLength;
    yield bytes;
  }
}

const SHA256_HEX = /^[0-9a-f]{64}$/;

export function isSha256Hex(value: string): boolean {
  return SHA256_HEX.test(value);
}
