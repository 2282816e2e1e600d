// The connection limits of the one-port listener (connection-limits.ts
// enforces them): what can be set, and the defaults, the connection cap
// following the process's open-file limit.
import { readFileSync } from "node:fs";

export interface ConnectionLimitOptions {
  /** Open connections at most (0: no cap). Default: 3/4 of the open-file limit, at most 10,000. */
  maxConnections?: number;
  /** From accept until the first request's headers are in (TLS handshake included); on a kept-alive HTTP/1.1 connection, from the next request's first byte. */
  headerTimeoutMs?: number;
  /** From a request's headers until its whole body is in. */
  bodyTimeoutMs?: number;
  /** How long a connection with no request in flight stays open. */
  idleTimeoutMs?: number;
  /** How long a response may be unable to write anything (its client stopped reading) before it is cut. */
  writeTimeoutMs?: number;
}

export type ConnectionLimits = Required<ConnectionLimitOptions>;

export const DEFAULT_HEADER_TIMEOUT_MS = 20_000;
export const DEFAULT_BODY_TIMEOUT_MS = 60_000;
export const DEFAULT_IDLE_TIMEOUT_MS = 60_000;
export const DEFAULT_WRITE_TIMEOUT_MS = 60_000;
export const MAX_CONNECTIONS_CEILING = 10_000;

/**
 * The cap must sit below the open-file limit: a process out of descriptors
 * cannot accept the connection that would let it shed an old one. A quarter
 * stays free for the store, logs and outbound calls.
 */
export function defaultMaxConnections(limitsFile = "/proc/self/limits"): number {
  try {
    const match = /^Max open files\s+(\d+)/m.exec(readFileSync(limitsFile, "utf8"));
    if (match) return Math.max(16, Math.min(MAX_CONNECTIONS_CEILING, Math.floor(Number(match[1]) * 0.75)));
  } catch {
    // Not Linux: no cheap way to read the limit.
  }
  return MAX_CONNECTIONS_CEILING;
}

export function resolveLimits(options: ConnectionLimitOptions): ConnectionLimits {
  return {
    maxConnections: options.maxConnections ?? defaultMaxConnections(),
    headerTimeoutMs: options.headerTimeoutMs ?? DEFAULT_HEADER_TIMEOUT_MS,
    bodyTimeoutMs: options.bodyTimeoutMs ?? DEFAULT_BODY_TIMEOUT_MS,
    idleTimeoutMs: options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS,
    writeTimeoutMs: options.writeTimeoutMs ?? DEFAULT_WRITE_TIMEOUT_MS,
  };
}
