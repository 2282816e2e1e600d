// Answers of the plain HTTP routes (uploads, the SSE stream): JSON bodies,
// and errors in the Connect protocol's JSON error shape with the same
// synapse.v1.ErrorDetail every RPC error carries, so one error reader
// serves both.
import { Code, ConnectError } from "@connectrpc/connect";
import { codeToHttpStatus, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import { asConnectError, shapeError } from "./error-shape.js";
import type { RequestHandler } from "./listener.js";

export type HttpRequest = Parameters<RequestHandler>[0];
export type HttpResponse = Parameters<RequestHandler>[1];

export function replyJson(res: HttpResponse, status: number, value: unknown, headers: Record<string, string> = {}): void {
  const body = Buffer.from(`${JSON.stringify(value)}\n`);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": String(body.byteLength), "Cache-Control": "no-store", ...headers });
  res.end(body);
}

/**
 * An error as Connect JSON (`{"code": ..., "message": ..., "details": [...]}`),
 * with the HTTP status of its code unless `status` says otherwise.
 */
export function replyError(res: HttpResponse, error: unknown, options: { status?: number; headers?: Record<string, string> } = {}): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const shaped = shapeError(asConnectError(error) ?? new ConnectError(String(error), Code.Internal));
  const body = errorToJsonBytes(shaped, undefined);
  res.writeHead(options.status ?? codeToHttpStatus(shaped.code), {
    "Content-Type": "application/json",
    "Content-Length": String(body.byteLength),
    "Cache-Control": "no-store",
    ...options.headers,
  });
  res.end(body);
}
