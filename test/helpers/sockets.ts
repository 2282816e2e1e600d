// Raw loopback sockets for tests of slow and stalled clients: what the
// server sent, and when (if ever) it closed the connection.
import { readFileSync } from "node:fs";
import net from "node:net";

export interface RawClient {
  readonly socket: net.Socket;
  /** Everything the server sent so far. */
  received(): string;
  closed(): boolean;
  /** Resolves with the milliseconds from `since` (default: connect) to the close. */
  whenClosed(since?: number): Promise<number>;
}

export function connectRaw(baseUrl: string, options: { read?: boolean } = {}): Promise<RawClient> {
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(url.port), url.hostname);
    let data = "";
    let closedAt: number | undefined;
    const connectedAt = performance.now();
    const closed = new Promise<void>((done) =>
      socket.once("close", () => {
        closedAt = performance.now();
        done();
      }),
    );
    socket.on("error", () => undefined);
    // A client that never reads must not see the close either, so it is not read at all.
    if (options.read !== false) socket.on("data", (chunk: Buffer) => (data += chunk.toString("latin1")));
    else socket.pause();
    socket.once("connect", () =>
      resolve({
        socket,
        received: () => data,
        closed: () => closedAt !== undefined,
        whenClosed: async (since = connectedAt) => {
          await closed;
          return closedAt! - since;
        },
      }),
    );
    socket.once("error", reject);
  });
}

/** Writes one byte of `text` every `everyMs` until the socket closes or the text runs out. */
export function trickle(socket: net.Socket, text: string, everyMs: number): () => void {
  let i = 0;
  const timer = setInterval(() => {
    if (socket.destroyed || i >= text.length) return clearInterval(timer);
    socket.write(text[i++]!);
  }, everyMs);
  return () => clearInterval(timer);
}

/** The soft open-file limit of this process (Linux), or undefined where it cannot be read. */
export function openFileLimit(pid: number | "self" = "self"): number | undefined {
  try {
    const match = /^Max open files\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/limits`, "utf8"));
    return match ? Number(match[1]) : undefined;
  } catch {
    return undefined;
  }
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** An HTTP/1.1 request to GetCapabilities, whole. */
export function getCapabilitiesRequest(connection: "keep-alive" | "close" = "keep-alive"): string {
  return `POST /synapse.v1.CapabilitiesService/GetCapabilities HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: ${connection}\r\n\r\n{}`;
}
