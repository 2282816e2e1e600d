// Follows one task with P2PService.Watch: the snapshot first, then every
// event from a sequence, live, until the task ends. A dropped stream is
// resumed from the next sequence (with a fresh token), so nothing is missed
// or repeated. Verification is the caller's: it gets the envelopes.
import { ConnectError } from "@connectrpc/connect";
import type { Envelope } from "../../gen/synapse/v1/envelope_pb.js";
import type { Task } from "../../gen/synapse/v1/p2p_pb.js";
import { p2p, RESUMABLE, type Session } from "./rpc.js";

export interface FollowHandlers {
  /** The task as the agent shows it when the stream opens (unsigned). */
  snapshot(task: Task): void;
  /** A signed event, in sequence order. */
  event(sequence: bigint, envelope: Envelope | undefined): void;
}

const MAX_RETRIES = 5;

/** Waits `ms`, or less when `signal` aborts. */
const pause = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    }, { once: true });
  });

/** A message of a resumable event stream (Watch, WatchGroup): a snapshot, a signed event, or a heartbeat. */
export interface StreamMessage<Snapshot> {
  kind:
    | { case: "snapshot"; value: Snapshot }
    | { case: "event"; value: { sequence: bigint; message?: { envelope?: Envelope } } }
    | { case: "heartbeat"; value: unknown }
    | { case: undefined; value?: undefined };
}

/**
 * Reads a stream that resumes from a sequence: opened with a fresh token from
 * `next()`, its snapshot and events handed over (an event before `next()`,
 * already handed over before a resume, is skipped), and opened again after a
 * drop, up to MAX_RETRIES times in a row with growing pauses. Resolves when
 * the server ends the stream or `signal` aborts; rejects on a refusal.
 */
export async function followStream<Snapshot>(
  session: Session,
  open: (fromSequence: bigint, headers: Record<string, string>) => AsyncIterable<StreamMessage<Snapshot>>,
  next: () => bigint,
  handlers: { snapshot(value: Snapshot): void; event(sequence: bigint, envelope: Envelope | undefined): void; reconnecting?(fromSequence: bigint): void },
  signal: AbortSignal,
): Promise<void> {
  let failures = 0;
  while (!signal.aborted) {
    try {
      for await (const message of open(next(), await session.authHeaders())) {
        failures = 0;
        if (signal.aborted) return;
        if (message.kind.case === "snapshot") handlers.snapshot(message.kind.value);
        else if (message.kind.case === "event") {
          const event = message.kind.value;
          if (event.sequence < next()) continue;
          handlers.event(event.sequence, event.message?.envelope);
        }
        // A heartbeat only keeps the stream open.
      }
      return;
    } catch (error) {
      if (signal.aborted) return;
      const connectError = ConnectError.from(error);
      if (!RESUMABLE.has(connectError.code) || failures >= MAX_RETRIES) throw connectError;
      failures++;
      handlers.reconnecting?.(next());
      await pause(500 * 2 ** (failures - 1), signal);
    }
  }
}

/**
 * Resolves when the stream ends after the task's terminal event, or when
 * `signal` aborts; rejects on a refusal (NOT_FOUND, UNAUTHENTICATED) or after
 * repeated connection failures.
 */
export function followTask(session: Session, taskId: string, fromSequence: bigint, handlers: FollowHandlers, signal: AbortSignal): Promise<void> {
  let next = fromSequence < 1n ? 1n : fromSequence;
  return followStream(
    session,
    (from, headers) => p2p.watch({ taskId, fromSequence: from }, { headers, signal }),
    () => next,
    {
      snapshot: handlers.snapshot,
      event(sequence, envelope) {
        next = sequence + 1n;
        handlers.event(sequence, envelope);
      },
    },
    signal,
  );
}
