// POST /upload (MultipartTransport): a multipart/form-data body whose
// `file` part is streamed into the store while it is hashed, never held
// whole in memory; the answer names the upload by its SHA-256 and size,
// which a task_request then names (TaskRequestPayload.uploads). Bearer
// token as for the reads; the upload limit, the sender's quota (smaller for
// a sender known only by first use) and its uploads in progress, and the
// room across all senders (their total, uploads at once, the disk's free
// space), are enforced as the bytes arrive.
import { ConnectError } from "@connectrpc/connect";
import { createHash } from "node:crypto";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import { NO_ROOM_RULES, overTotal } from "../agent/upload-room.js";
import type { AgentUploads } from "../agent/uploads.js";
import type { Logger } from "../log.js";
import { findErrorDetail, protocolError } from "../protocol/errors.js";
import { UploadQuotaError, type UploadRecord, type UploadWriter } from "../store/uploads.js";
import { authenticateHeader, type BearerPolicy } from "./auth.js";
import { timeBodyByProgress } from "./connection-limits.js";
import { replyError, replyJson, type HttpRequest, type HttpResponse } from "./http-reply.js";
import { MultipartError, multipartBoundary, readMultipart } from "./multipart.js";
import { counted } from "../text/plural.js";

export const UPLOAD_PATH = "/upload";
/** The form field that carries the file (`curl -F file=@big.csv`). */
export const FILE_FIELD = "file";

export interface UploadRouteOptions {
  uploads: AgentUploads;
  bearer: BearerPolicy;
  logger: Logger;
}

/** What POST /upload answers (JSON). */
export interface UploadAnswer {
  sha256: string;
  size: number;
  contentType: string;
  fileName: string;
}

const tooLarge = (limit: number) =>
  protocolError(ErrorCode.UPLOAD_TOO_LARGE, `the upload exceeds this agent's upload limit of ${limit} bytes`, { details: { max_upload_bytes: limit } });
const overQuota = (used: number, quota: number, firstUse: boolean) =>
  protocolError(
    ErrorCode.UPLOAD_QUOTA_EXCEEDED,
    `your uploads would hold ${used} bytes; your quota is ${quota} bytes${firstUse ? " (a sender known only by first use)" : ""} (unused uploads are dropped after a while)`,
    { details: { rule: "sender_quota", used_bytes: used, quota_bytes: quota, trust: firstUse ? "first_use" : "bound" } },
  );
/**
 * An upload over the limit is HTTP 413 (its code alone would say 429:
 * retrying does not help); no room on the agent (its total, its disk) is 507.
 */
function statusOf(error: unknown): number | undefined {
  const detail = findErrorDetail(error);
  if (detail?.code === ErrorCode.UPLOAD_TOO_LARGE) return 413;
  const rule = detail?.details?.rule;
  return typeof rule === "string" && NO_ROOM_RULES.has(rule) ? 507 : undefined;
}

async function* bodyOf(req: HttpRequest): AsyncIterable<Uint8Array> {
  for await (const chunk of req as AsyncIterable<Buffer>) yield chunk;
}

export function uploadHandler(options: UploadRouteOptions): (req: HttpRequest, res: HttpResponse) => void {
  const { uploads, logger } = options;
  const inProgress = new Map<string, number>();
  return (req, res) => {
    if (req.method !== "POST") {
      res.writeHead(405, { Allow: "POST", "Content-Type": "text/plain; charset=utf-8" });
      res.end("POST a multipart/form-data body with a file part\n");
      return;
    }
    let owner: string | undefined;
    const run = async (): Promise<UploadAnswer> => {
      const caller = await authenticateHeader(options.bearer, req.headers.authorization);
      owner = caller.agentId;
      const boundary = multipartBoundary(req.headers["content-type"]);
      if (boundary === undefined) throw protocolError(ErrorCode.INVALID_PARAMS, "the body must be multipart/form-data with a boundary (curl -F file=@FILE)");
      const { maxUploadBytes, maxConcurrentPerSender } = uploads.limits;
      const quota = { bytes: uploads.quotaFor(caller), firstUse: caller.firstUse };
      // A declared length over the limit is refused before a byte is read (the multipart framing is a few hundred bytes).
      const declared = Number(req.headers["content-length"] ?? NaN);
      if (declared > maxUploadBytes + 64 * 1024) throw tooLarge(maxUploadBytes);
      const running = inProgress.get(owner) ?? 0;
      if (running >= maxConcurrentPerSender) {
        throw protocolError(ErrorCode.RATE_LIMITED, `you have ${counted(running, "upload")} in progress, the most this agent takes at once from one sender`, {
          retryAfterSeconds: 5,
          details: { rule: "sender_uploads_in_progress", max_concurrent_per_sender: maxConcurrentPerSender },
        });
      }
      const used = await uploads.store.usage(owner);
      if (used >= quota.bytes) throw overQuota(used, quota.bytes, quota.firstUse);
      await uploads.room.enter();
      inProgress.set(owner, running + 1);
      const arrived = { bytes: 0, stored: 0 };
      try {
        return await receive(owner, boundary, used, quota, arrived);
      } finally {
        uploads.room.leave(arrived.bytes, arrived.stored);
        const left = (inProgress.get(owner) ?? 1) - 1;
        if (left === 0) inProgress.delete(owner);
        else inProgress.set(owner, left);
      }
    };

    const receive = async (
      sender: string,
      boundary: string,
      used: number,
      quota: { bytes: number; firstUse: boolean },
      arrived: { bytes: number; stored: number },
    ): Promise<UploadAnswer> => {
      const { maxUploadBytes, totalBytes } = uploads.limits;
      // A large file takes as long as it takes; it is cut only when its bytes stop coming.
      timeBodyByProgress(req);
      let writer: UploadWriter | undefined;
      let record: UploadRecord | undefined;
      try {
        let size = 0;
        let hash: ReturnType<typeof createHash> | undefined;
        let meta = { contentType: "", fileName: "" };
        let current: "file" | "other" | undefined;
        for await (const item of readMultipart(bodyOf(req), boundary)) {
          if (item.kind === "part") {
            current = item.name === FILE_FIELD && writer === undefined ? "file" : "other";
            if (current === "file") {
              writer = await uploads.store.beginUpload(sender, Date.now());
              hash = createHash("sha256");
              meta = { contentType: item.contentType, fileName: item.fileName ?? "" };
            }
          } else if (item.kind === "data" && current === "file") {
            size += item.bytes.byteLength;
            if (size > maxUploadBytes) throw tooLarge(maxUploadBytes);
            if (used + size > quota.bytes) throw overQuota(used + size, quota.bytes, quota.firstUse);
            await uploads.room.take(item.bytes.byteLength);
            arrived.bytes += item.bytes.byteLength;
            hash!.update(item.bytes);
            await writer!.write(item.bytes);
          } else if (item.kind === "end-part" && current === "file") {
            current = undefined;
            record = await writer!.commit({ sha256: hash!.digest("hex"), size, ...meta, quotaBytes: quota.bytes, totalBytes });
            arrived.stored = record.size;
          }
        }
        if (record === undefined) throw protocolError(ErrorCode.INVALID_PARAMS, `the body has no complete part named ${FILE_FIELD} (curl -F ${FILE_FIELD}=@FILE)`);
        return { sha256: record.sha256, size: record.size, contentType: record.contentType, fileName: record.fileName };
      } catch (error) {
        if (record === undefined) await writer?.abort().catch(() => undefined);
        if (error instanceof UploadQuotaError) {
          throw error.scope === "total" ? overTotal(error.usedBytes, error.quotaBytes) : overQuota(error.usedBytes, error.quotaBytes, quota.firstUse);
        }
        if (error instanceof MultipartError) throw protocolError(ErrorCode.INVALID_PARAMS, `the multipart body is malformed: ${error.message}`);
        throw error;
      }
    };

    run().then(
      (answer) => {
        logger.info({ sender: owner, sha256: answer.sha256, size: answer.size }, "upload stored");
        replyJson(res, 200, answer);
      },
      (error: unknown) => {
        // The rest of a refused body is not read: an HTTP/1.1 connection cannot carry another request.
        if (req.httpVersionMajor === 1 && !req.complete && !res.headersSent) res.setHeader("Connection", "close");
        if (!(error instanceof ConnectError)) logger.warn({ err: error, sender: owner }, "upload failed");
        replyError(res, error, { status: statusOf(error) });
      },
    );
  };
}
