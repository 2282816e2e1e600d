// What a requester's streaming reads share: when a dropped stream may be
// resumed and how long to wait first, the checks of a result stream's
// chunks against what the executor signed, and where an event leads when a
// watch resumes with no state to check it against.
import { Code, ConnectError } from "@connectrpc/connect";
import { createHash } from "node:crypto";
import { MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import type { ReadResultResponse } from "../../gen/synapse/v1/p2p_pb.js";
import { TaskState, type ResultStream, type TaskAckPayload } from "../../gen/synapse/v1/payloads_pb.js";
import { bytesEqual } from "../crypto/encoding.js";
import { protocolError } from "../protocol/errors.js";
import type { VerifiedMessage } from "./requester-types.js";

/** Stream errors a read resumes after: the connection or the server went away, or it answered for now. */
const RESUMABLE = new Set([Code.Unavailable, Code.Internal, Code.Unknown, Code.Aborted, Code.DeadlineExceeded]);

/** When and after how long a dropped stream is opened again. */
export class Resumption {
  constructor(
    private readonly maxRetries: number,
    private readonly retryBaseDelayMs: number,
  ) {}

  /** The error as a ConnectError when a stream may be resumed after it; otherwise it is thrown. */
  resumable(error: unknown, attempt: number, signal: AbortSignal | undefined): ConnectError {
    const connectError = ConnectError.from(error);
    if (signal?.aborted || !RESUMABLE.has(connectError.code) || attempt >= this.maxRetries) throw connectError;
    return connectError;
  }

  /** Exponential backoff before resume attempt `attempt` (1, 2, 3, ...). */
  backoff(attempt: number): Promise<void> {
    return new Promise((resolve) => setTimeout(resolve, this.retryBaseDelayMs * 2 ** (attempt - 1)));
  }
}

/**
 * A result stream read whole from `offset` (resumed after a dropped
 * connection), its size and SHA-256 checked against `expected` (from the
 * signed task_complete) when given, else against the last chunk.
 */
export async function readStream(
  read: (offset: number) => Promise<AsyncIterable<ReadResultResponse>>,
  options: { offset?: number; expected?: ResultStream; signal?: AbortSignal },
  resumption: Resumption,
): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let offset = options.offset ?? 0;
  let attempt = 0;
  for (;;) {
    try {
      for await (const { chunk } of await read(offset)) {
        if (chunk === undefined) continue;
        if (Number(chunk.offset) !== offset) throw protocolError(ErrorCode.MESSAGE_FORMAT_INVALID, `chunk at ${chunk.offset} where ${offset} was due`);
        parts.push(chunk.data);
        offset += chunk.data.byteLength;
        attempt = 0;
        if (chunk.last) {
          const bytes = Buffer.concat(parts);
          const size = Number(options.expected?.totalSize ?? chunk.totalSize);
          const digest = options.expected?.sha256 ?? chunk.sha256;
          if (offset !== size) throw protocolError(ErrorCode.MESSAGE_FORMAT_INVALID, `result is ${offset} bytes, ${size} were promised`);
          // With a starting offset, only the bytes read here are returned, so only the whole stream is hashed.
          if ((options.offset ?? 0) === 0 && !bytesEqual(new Uint8Array(createHash("sha256").update(bytes).digest()), digest)) {
            throw protocolError(ErrorCode.SIGNATURE_INVALID, "result SHA-256 does not match what the executor signed");
          }
          return bytes;
        }
      }
      throw protocolError(ErrorCode.MESSAGE_FORMAT_INVALID, "result stream ended without its last chunk");
    } catch (error) {
      resumption.resumable(error, attempt, options.signal);
      attempt++;
      await resumption.backoff(attempt);
    }
  }
}

/** Where an event leads, from its type alone (when resuming without a known state). */
export function impliedState(event: VerifiedMessage): TaskState {
  switch (event.type) {
    case MessageType.TASK_CONFIRM:
      return TaskState.CONFIRMED;
    case MessageType.TASK_REJECT:
      return TaskState.REJECTED;
    case MessageType.TASK_STATUS_UPDATE:
      return TaskState.EXECUTING;
    case MessageType.TASK_NEED_INFO:
      return TaskState.INFO_NEEDED;
    case MessageType.TASK_NEED_HUMAN:
      return TaskState.NEED_HUMAN;
    case MessageType.TASK_COMPLETE:
      return TaskState.COMPLETED;
    case MessageType.TASK_FAILED:
      return TaskState.FAILED;
    case MessageType.TASK_ACK:
      return (event.payload as TaskAckPayload).state;
    default:
      return TaskState.UNSPECIFIED;
  }
}
