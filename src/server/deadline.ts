// Deadlines a timer can hold. A client may ask for up to 99999999 hours
// (grpc-timeout) or 9999999999 ms (connect-timeout-ms); Node cannot set a
// timer past 2^31-1 ms (about 24.8 days) and fires such a timer after 1 ms
// instead, so a call with a very long deadline would end at once with
// DEADLINE_EXCEEDED. Longer deadlines are held to the longest a timer takes.
import type { IncomingHttpHeaders } from "node:http";

const MAX_TIMER_MS = 2 ** 31 - 1;
const UNIT_MS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 0.001, n: 0.000001 };

/** Rewrites a well-formed deadline header that is longer than a timer can hold; leaves anything else to the protocol. */
export function clampDeadlineHeaders(headers: IncomingHttpHeaders): void {
  const grpc = headers["grpc-timeout"];
  const parsed = typeof grpc === "string" ? /^(\d{1,8})([HMSmun])$/.exec(grpc) : null;
  // grpc-timeout takes at most 8 digits: whole seconds, then.
  if (parsed !== null && Number(parsed[1]) * UNIT_MS[parsed[2]!]! > MAX_TIMER_MS) headers["grpc-timeout"] = `${Math.floor(MAX_TIMER_MS / 1000)}S`;
  const connect = headers["connect-timeout-ms"];
  if (typeof connect === "string" && /^\d{1,10}$/.test(connect) && Number(connect) > MAX_TIMER_MS) headers["connect-timeout-ms"] = String(MAX_TIMER_MS);
}
