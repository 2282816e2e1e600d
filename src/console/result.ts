// A task's result: the output the signed task_complete carries, or, for a
// result offered as a stream, a download through P2PService.ReadResult
// (resumed from the bytes received if the stream breaks) whose size and
// SHA-256 are checked against the signed task_complete before it is offered
// to save. A confidential task's stream is sealed records (docs/PROTOCOL.md
// §9.5): size and SHA-256 are those of the sealed bytes, which are then
// opened, record by record, with the task key.
import { toJson, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { ConnectError } from "@connectrpc/connect";
import type { ResultStream, TaskResult } from "../../gen/synapse/v1/payloads_pb.js";
import { bytesEqual, sha256, toHex } from "./bytes.js";
import { describeError, p2p, RESUMABLE, type Session } from "./rpc.js";
import { button, el, formatBytes, show } from "./view.js";

const PREVIEW_BYTES = 4096;
const MAX_RESUMES = 3;

/** Reads the whole stream, resuming after a dropped connection from the bytes already received. */
async function readStream(session: Session, taskId: string, onProgress: (received: number) => void): Promise<Uint8Array<ArrayBuffer>> {
  const parts: Uint8Array[] = [];
  let received = 0;
  let resumes = 0;
  for (;;) {
    try {
      const headers = await session.authHeaders();
      for await (const { chunk } of p2p.readResult({ taskId, offset: BigInt(received) }, { headers })) {
        if (chunk === undefined) continue;
        if (chunk.offset !== BigInt(received)) throw new Error(`a chunk at offset ${chunk.offset} arrived where ${received} was due`);
        parts.push(chunk.data);
        received += chunk.data.byteLength;
        onProgress(received);
        if (chunk.last) {
          const all = new Uint8Array(received);
          let at = 0;
          for (const part of parts) {
            all.set(part, at);
            at += part.byteLength;
          }
          return all;
        }
      }
      throw new Error("the stream ended before its last chunk");
    } catch (error) {
      const connectError = error instanceof ConnectError ? error : undefined;
      if (connectError === undefined || !RESUMABLE.has(connectError.code) || ++resumes > MAX_RESUMES) throw error;
    }
  }
}

function preview(data: Uint8Array, contentType: string): HTMLElement {
  if (!/json|text/.test(contentType)) return el("p", { class: "note" }, `${contentType}: no preview`);
  const text = new TextDecoder().decode(data.subarray(0, PREVIEW_BYTES));
  return el("pre", { class: "result-preview", "data-testid": "result-preview" }, data.byteLength > PREVIEW_BYTES ? `${text}\n… (${data.byteLength - PREVIEW_BYTES} more bytes)` : text);
}

function streamPanel(session: Session, taskId: string, stream: ResultStream, signed: boolean, confidential: boolean): HTMLElement {
  const status = el("p", { "data-testid": "result-check", role: "status" });
  const output = el("div", {});
  const download = button(`Download ${formatBytes(stream.totalSize)} (ReadResult)`, () => {
    download.disabled = true;
    status.className = "";
    status.textContent = "reading…";
    readStream(session, taskId, (received) => {
      status.textContent = `reading… ${received} of ${stream.totalSize} bytes`;
    })
      .then(async (received) => {
        const digest = await sha256(received);
        const sizeOk = BigInt(received.byteLength) === stream.totalSize;
        const hashOk = bytesEqual(digest, stream.sha256);
        const ok = sizeOk && hashOk && signed;
        // Opened only once the sealed bytes are the ones the signed task_complete describes.
        const data = confidential && sizeOk && hashOk ? await session.keys.openResult(taskId, received) : received;
        status.className = ok ? "ok" : "bad";
        status.dataset.ok = String(ok);
        if (confidential && ok) status.dataset.opened = "true";
        status.textContent = !sizeOk
          ? `✗ ${received.byteLength} bytes, but the task_complete says ${stream.totalSize}`
          : !hashOk
            ? `✗ SHA-256 ${toHex(digest)} is not the ${toHex(stream.sha256)} the task_complete says`
            : signed
              ? confidential
                ? `✓ ${received.byteLength} sealed bytes match the signed task_complete; opened to ${data.byteLength} bytes`
                : `✓ ${data.byteLength} bytes; size and SHA-256 match the signed task_complete`
              : `${data.byteLength} bytes match the task as the agent shows it, but no verified task_complete vouches for them`;
        if (confidential && !(sizeOk && hashOk)) return; // sealed bytes that are not the signed ones are not opened, nor offered
        const url = URL.createObjectURL(new Blob([data], { type: stream.contentType || "application/octet-stream" }));
        const name = `${taskId}${/json/.test(stream.contentType) ? ".json" : ".bin"}`;
        show(output, el("a", { href: url, download: name, class: "button", "data-testid": "result-save" }, `Save ${name}`), preview(data, stream.contentType));
      })
      .catch((error: unknown) => {
        status.className = "bad";
        status.textContent = `✗ ${describeError(error)}`;
      })
      .finally(() => {
        download.disabled = false;
      });
  }, { "data-testid": "result-download" });
  return el(
    "div",
    { class: "result-stream" },
    el("p", {}, `Offered as a stream: ${formatBytes(stream.totalSize)} of ${stream.contentType || "bytes"}, SHA-256 `, el("code", {}, toHex(stream.sha256))),
    download,
    status,
    output,
  );
}

/**
 * The result panel. `result` comes from the verified task_complete when
 * `signed`, else from the task as GetTask shows it.
 */
export function resultPanel(session: Session, taskId: string, result: TaskResult | undefined, signed: boolean, confidential = false): HTMLElement {
  const panel = el("div", { class: "result", "data-testid": "task-result-panel", "data-signed": String(signed) });
  if (result === undefined) return panel;
  if (!signed) panel.append(el("p", { class: "note" }, "As the agent shows it; no verified task_complete carries it."));
  if (result.output !== undefined) {
    const value = toJson(ValueSchema, result.output) as JsonValue;
    panel.append(el("pre", { "data-testid": "task-result" }, JSON.stringify(value, null, 2)));
  }
  if (result.stream !== undefined) panel.append(streamPanel(session, taskId, result.stream, signed, confidential));
  return panel;
}
