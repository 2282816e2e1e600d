// Writing to a response that streams: when the client has not taken what is
// buffered, the writer waits for it (or for the response to close) before
// writing more. A client that stops reading for good is cut by the listener's
// write timeout.
import type { RequestHandler } from "./listener.js";

type StreamingResponse = Parameters<RequestHandler>[1];

/** Writes `chunk` (nothing once the response has ended or is gone); resolves when the response can take more. */
export function writeWaiting(res: StreamingResponse, chunk: string | Uint8Array): Promise<void> {
  if (res.writableEnded || res.destroyed) return Promise.resolve();
  if ((res as { write(chunk: string | Uint8Array): boolean }).write(chunk)) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      res.off("drain", done);
      res.off("close", done);
      resolve();
    };
    res.once("drain", done);
    res.once("close", done);
  });
}
