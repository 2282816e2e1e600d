// Room for uploads across every sender: the total their finished uploads
// may hold, the bytes still arriving, how many uploads run at once, and the
// free space left on the filesystem under the data dir. Per-sender quotas
// alone do not bound a disk: anyone can make a fresh key and be a new
// sender. The store checks the total again in the commit that finishes each
// upload; this is what is known before and while the bytes arrive.
import { statfs as fsStatfs } from "node:fs/promises";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import { protocolError } from "../protocol/errors.js";
import type { UploadStore } from "../store/uploads.js";

/** What is asked of the filesystem: `fs.statfs`'s answer, the fields used. */
export interface FilesystemSpace {
  /** Blocks free to an unprivileged process. */
  bavail: number;
  /** Bytes per block. */
  bsize: number;
}

/** Reads the free space of the filesystem a path is on (`fs.statfs`, or a stand-in for tests). */
export type Statfs = (path: string) => Promise<FilesystemSpace>;

/** The bounds on uploads across every sender (part of {@link UploadLimits}). */
export interface UploadRoomLimits {
  /** What every sender's finished uploads, with those still arriving, may hold together. */
  totalBytes: number;
  /** Uploads in progress at once, from all senders together. */
  maxConcurrent: number;
  /** Free bytes uploads must leave on the filesystem of `spacePath` (task writes need them). */
  reserveBytes: number;
  /** A path on the filesystem the store writes to (the data dir); none: free space is not checked. */
  spacePath?: string;
  /** How free space is read; default `fs.statfs`. */
  statfs?: Statfs;
}

/** How long one reading of free space is believed; bytes taken since are subtracted from it. */
const SPACE_READING_MS = 1000;
/** How long a refused uploader is told to wait: unused uploads are dropped, and others finish. */
const RETRY_AFTER_SECONDS = 60;

/** The refusals when there is no room: RESOURCE_EXHAUSTED, answered as HTTP 507 by POST /upload. */
export const NO_ROOM_RULES = new Set(["total", "disk_reserve"]);

/** Every sender's uploads together would hold `used` bytes, more than the agent's total. */
export function overTotal(used: number, total: number) {
  return protocolError(
    ErrorCode.UPLOAD_QUOTA_EXCEEDED,
    `this agent's uploads from all senders would hold ${used} bytes, more than its total of ${total}; try again later (unused uploads are dropped after a while)`,
    { retryAfterSeconds: RETRY_AFTER_SECONDS, details: { rule: "total", used_bytes: used, total_bytes: total } },
  );
}

export class UploadRoom {
  /** Finished uploads' bytes as last read from the store, plus those finished here since. */
  private stored = 0;
  private arriving = 0;
  private running = 0;
  private reading: { freeBytes: number; atMs: number; takenSince: number } | undefined;
  private readingNow: Promise<void> | undefined;
  private readonly statfs: Statfs;

  constructor(
    private readonly store: UploadStore,
    readonly limits: UploadRoomLimits,
    private readonly now: () => number,
  ) {
    this.statfs = limits.statfs ?? ((path) => fsStatfs(path));
  }

  /** Uploads in progress here now. */
  get inProgress(): number {
    return this.running;
  }

  /**
   * Takes a place for one more upload, or refuses: too many in progress,
   * the total reached, or the filesystem at its reserve. Every place taken
   * is given back with {@link leave}.
   */
  async enter(): Promise<void> {
    if (this.running >= this.limits.maxConcurrent) {
      throw protocolError(ErrorCode.RATE_LIMITED, `${this.running} uploads are in progress, the most this agent takes at once from all senders`, {
        retryAfterSeconds: 5,
        details: { rule: "uploads_in_progress", max_concurrent: this.limits.maxConcurrent },
      });
    }
    this.running++;
    try {
      this.stored = await this.store.totalUsage();
      await this.take(0);
    } catch (error) {
      this.running--;
      throw error;
    }
  }

  /** Counts `bytes` more arriving for an upload in progress, refusing them when they would not fit. */
  async take(bytes: number): Promise<void> {
    const { totalBytes } = this.limits;
    if (this.stored + this.arriving + bytes > totalBytes) {
      throw overTotal(this.stored + this.arriving + bytes, totalBytes);
    }
    await this.requireFreeSpace(bytes);
    this.arriving += bytes;
    if (this.reading !== undefined) this.reading.takenSince += bytes;
  }

  /** An upload ended: its place and its arriving bytes are given back; `storedBytes` of them now stay in the store. */
  leave(arrivedBytes: number, storedBytes: number): void {
    this.running--;
    this.arriving = Math.max(0, this.arriving - arrivedBytes);
    this.stored += storedBytes;
  }

  private async requireFreeSpace(bytes: number): Promise<void> {
    const { spacePath, reserveBytes } = this.limits;
    if (spacePath === undefined) return;
    if (this.reading === undefined || this.now() - this.reading.atMs >= SPACE_READING_MS) {
      this.readingNow ??= this.readSpace(spacePath).finally(() => (this.readingNow = undefined));
      await this.readingNow;
    }
    const reading = this.reading!;
    const free = reading.freeBytes - reading.takenSince;
    if (free - bytes < reserveBytes) {
      throw protocolError(
        ErrorCode.UPLOAD_QUOTA_EXCEEDED,
        `the agent's disk is nearly full: uploads must leave ${reserveBytes} bytes free, and ${Math.max(0, free)} are; try again later`,
        { retryAfterSeconds: RETRY_AFTER_SECONDS, details: { rule: "disk_reserve", free_bytes: Math.max(0, free), reserve_bytes: reserveBytes } },
      );
    }
  }

  private async readSpace(path: string): Promise<void> {
    const space = await this.statfs(path);
    this.reading = { freeBytes: space.bavail * space.bsize, atMs: this.now(), takenSince: 0 };
  }
}
