// The running server's local control channel: a Unix socket in its data dir
// (control.sock, mode 0600 in a 0700 directory), so only the user who owns
// the data dir can reach it, with no key, token or port involved. One JSON
// line asks, one JSON line answers. `synapse backup` uses it to have the
// server copy the store it holds exclusively.
import { chmod, rm } from "node:fs/promises";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";
import type { Logger } from "../log.js";

export const CONTROL_SOCKET = "control.sock";
/** Longest Unix socket path Linux takes (sun_path is 108 bytes with its NUL). */
const MAX_SOCKET_PATH = 107;
/** A request line longer than this is not one of ours. */
const MAX_REQUEST_BYTES = 64 * 1024;

export type ControlRequest = { command: "backup"; to: string };
export type ControlReply = { ok: true; result: unknown } | { ok: false; error: string };
export type ControlHandler = (request: ControlRequest) => Promise<unknown>;

export function controlSocketPath(dataDir: string): string {
  return join(dataDir, CONTROL_SOCKET);
}

/**
 * Listens on the data dir's control socket until the returned close is
 * called. A path too long for a Unix socket is logged and skipped: the
 * server runs without the channel (and a backup needs it stopped).
 */
export async function listenForControl(dataDir: string, handle: ControlHandler, logger: Logger): Promise<() => Promise<void>> {
  const path = controlSocketPath(dataDir);
  if (Buffer.byteLength(path) > MAX_SOCKET_PATH) {
    logger.warn({ path }, "the data dir's path is too long for a control socket: `synapse backup` works only while the server is stopped");
    return async () => {};
  }
  // The data dir is held by this process alone (the store's lock), so a socket file left there is a dead server's.
  await rm(path, { force: true });
  const server = createServer((socket) => serveOne(socket, handle, logger));
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(path, () => {
      server.off("error", reject);
      resolve();
    });
  });
  await chmod(path, 0o600);
  server.on("error", (error) => logger.warn({ err: error }, "control socket error"));
  return () => closeServer(server, path);
}

function serveOne(socket: Socket, handle: ControlHandler, logger: Logger): void {
  let buffered = "";
  socket.setEncoding("utf8");
  socket.on("error", () => socket.destroy());
  socket.on("data", (chunk: string) => {
    buffered += chunk;
    if (buffered.length > MAX_REQUEST_BYTES) return answer(socket, { ok: false, error: "request too long" });
    const end = buffered.indexOf("\n");
    if (end < 0) return;
    socket.removeAllListeners("data");
    let request: ControlRequest;
    try {
      request = parseRequest(buffered.slice(0, end));
    } catch (error) {
      return answer(socket, { ok: false, error: (error as Error).message });
    }
    logger.info({ command: request.command }, "control request");
    handle(request).then(
      (result) => answer(socket, { ok: true, result }),
      (error: unknown) => {
        logger.warn({ err: error, command: request.command }, "control request failed");
        answer(socket, { ok: false, error: error instanceof Error ? error.message : String(error) });
      },
    );
  });
}

function parseRequest(line: string): ControlRequest {
  const value = JSON.parse(line) as Partial<ControlRequest>;
  if (value.command === "backup" && typeof value.to === "string" && value.to.startsWith("/")) return { command: "backup", to: value.to };
  throw new Error(`not a control request: ${line.slice(0, 200)}`);
}

function answer(socket: Socket, reply: ControlReply): void {
  socket.end(`${JSON.stringify(reply)}\n`);
}

async function closeServer(server: Server, path: string): Promise<void> {
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await rm(path, { force: true });
}

/**
 * Asks the server holding `dataDir` to do something. Undefined when no
 * server listens there (no socket, or a dead one's file).
 */
export function askControl(dataDir: string, request: ControlRequest, timeoutMs = 10 * 60_000): Promise<ControlReply | undefined> {
  return new Promise((resolve, reject) => {
    const socket = createConnection(controlSocketPath(dataDir));
    let received = "";
    let connected = false;
    socket.setEncoding("utf8");
    socket.setTimeout(timeoutMs, () => socket.destroy(new Error(`the server did not answer within ${Math.round(timeoutMs / 1000)} s`)));
    socket.on("connect", () => {
      connected = true;
      socket.write(`${JSON.stringify(request)}\n`);
    });
    socket.on("data", (chunk: string) => {
      received += chunk;
    });
    socket.on("error", (error: NodeJS.ErrnoException) => {
      if (!connected && (error.code === "ENOENT" || error.code === "ECONNREFUSED")) resolve(undefined);
      else reject(error);
    });
    socket.on("end", () => {
      try {
        resolve(JSON.parse(received) as ControlReply);
      } catch {
        reject(new Error("the server's control socket answered something unreadable"));
      }
    });
  });
}
