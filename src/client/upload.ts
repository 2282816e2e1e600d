// Uploading a file to an agent (POST /upload, multipart/form-data) from
// disk as a stream, with its length declared so an agent can refuse a file
// over its limit before the bytes travel. The answer names the upload as a
// task_request then names it (TaskRequestPayload.uploads).
import { ConnectError } from "@connectrpc/connect";
import { codeFromHttpStatus, errorFromJsonBytes } from "@connectrpc/connect/protocol-connect";
import { randomBytes } from "node:crypto";
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import http from "node:http";
import https from "node:https";
import { basename } from "node:path";
import { untrustedCertificateError } from "./tls-errors.js";

/** What the agent answered to an upload: name the file in a task by `sha256` and `size` (`SubmitOptions.uploads`). */
export interface UploadAnswer {
  /** SHA-256 of the file, lowercase hex. */
  sha256: string;
  /** Its size in bytes. */
  size: number;
  /** Its media type, as sent. */
  contentType: string;
  /** Its file name, as sent. */
  fileName: string;
}

/** Options of {@link uploadFile}. */
export interface UploadFileOptions {
  /** The agent's base URL. */
  baseUrl: string;
  /** A bearer token for the agent (`SynapseClient.token()`). */
  token: string;
  /** The file to upload, read as a stream. */
  path: string;
  /** The bytes to upload instead of the file's (a sealed file, say); `path` then only names it. */
  data?: Uint8Array;
  /** Its media type; default `application/octet-stream`. */
  contentType?: string;
  /** Aborts the upload. */
  signal?: AbortSignal;
  /** Extra CA certificates (PEM) to trust for an https URL, as in `TransportOptions.ca`. */
  ca?: string | Buffer;
}

/** Quotes a value for a Content-Disposition parameter (RFC 7578 §4.2: quotes and line breaks escaped). */
function quoted(value: string): string {
  return `"${value.replace(/["\\\r\n]/g, (c) => encodeURIComponent(c))}"`;
}

/**
 * Uploads a file to an agent (`POST /upload`, streamed from disk) for a
 * task to name: submit the task with `uploads: [{ name, sha256, size }]`
 * from the answer, and the agent checks the bytes against that signed hash
 * before its handler reads them.
 *
 * @throws `ConnectError` when the agent refuses it (`upload_too_large`,
 *   `upload_quota_exceeded`, ...).
 *
 * @example
 * ```ts
 * const { sha256, size } = await uploadFile({ baseUrl: url, token: await client.token(), path: "big.csv", contentType: "text/csv" });
 * await client.submit("data_analysis", {}, { uploads: [{ name: "csv", sha256, size }] });
 * ```
 */
export async function uploadFile(options: UploadFileOptions): Promise<UploadAnswer> {
  const size = options.data?.byteLength ?? (await stat(options.path)).size;
  const boundary = `synapse-${randomBytes(12).toString("hex")}`;
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename=${quoted(basename(options.path))}\r\n` +
      `Content-Type: ${options.contentType ?? "application/octet-stream"}\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const url = new URL("upload", options.baseUrl.endsWith("/") ? options.baseUrl : `${options.baseUrl}/`);
  const client = url.protocol === "https:" ? https : http;
  return new Promise<UploadAnswer>((resolve, reject) => {
    let answered = false;
    const request = client.request(
      url,
      {
        method: "POST",
        signal: options.signal,
        ...(options.ca === undefined ? {} : { ca: options.ca }),
        headers: {
          Authorization: `Bearer ${options.token}`,
          "Content-Type": `multipart/form-data; boundary=${boundary}`,
          "Content-Length": String(head.byteLength + size + tail.byteLength),
        },
      },
      (response) => {
        answered = true;
        const parts: Buffer[] = [];
        response.on("data", (part: Buffer) => parts.push(part));
        response.on("error", reject);
        response.on("end", () => {
          const body = Buffer.concat(parts);
          const status = response.statusCode ?? 0;
          if (status === 200) {
            try {
              resolve(JSON.parse(body.toString("utf8")) as UploadAnswer);
            } catch {
              reject(new Error(`the agent answered the upload with a body that is not JSON`));
            }
            return;
          }
          reject(errorFromJsonBytes(body, undefined, new ConnectError(`upload refused with HTTP ${status}`, codeFromHttpStatus(status))));
        });
      },
    );
    // An agent that refuses a file early answers, then stops reading: the answer, not the broken pipe, is what counts.
    request.on("error", (error) => {
      if (!answered) setTimeout(() => answered || reject(untrustedCertificateError(error, url.href)), 200);
    });
    request.write(head);
    if (options.data !== undefined) {
      request.write(options.data);
      request.end(tail);
      return;
    }
    const file = createReadStream(options.path);
    file.on("error", (error) => request.destroy(error));
    file.on("end", () => request.end(tail));
    file.pipe(request, { end: false });
  });
}
