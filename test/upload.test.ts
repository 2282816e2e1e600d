// MultipartTransport through real sockets: a 50 MB CSV, ten times the
// agent's max_file_size, uploaded with `curl -F file=@big.csv` to a
// `synapse serve` process on its SQLite store whose JavaScript heap is
// capped below the file's size, then analysed by the reference
// data_analysis task that names it. The store receives an upload's bytes
// while the body is still arriving. Then the refusals, typed: no token, not
// multipart, an upload over the limit (413) or the quota (429), a request
// naming an upload that is not the sender's, and stored bytes that no
// longer match the signed hash (the task fails before its handler runs).
import { ConnectError } from "@connectrpc/connect";
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { createWriteStream } from "node:fs";
import http from "node:http";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorCode } from "../gen/synapse/v1/errors_pb.js";
import { MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { TaskState } from "../gen/synapse/v1/payloads_pb.js";
import { SynapseClient } from "../src/client/requester.js";
import { uploadFile } from "../src/client/upload.js";
import { fromValue } from "../src/protocol/json-values.js";
import { findErrorDetail } from "../src/protocol/errors.js";
import { memoryStorage } from "../src/store/memory/index.js";
import type { UploadStore } from "../src/store/uploads.js";
import { expectProtoJsonNames, runCli, startServe, type ServeProcess } from "./helpers/cli.js";
import { connectClient, requesterIdentity, startTestServer, tempDir, type TestServer } from "./helpers/server.js";

const MB = 1024 * 1024;

/** Runs curl and returns its exit code, HTTP status and body. */
function curl(args: string[]): Promise<{ code: number | null; status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn("curl", ["-sS", "-w", "\n%{http_code}", ...args]);
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => {
      const at = out.lastIndexOf("\n");
      resolve({ code, status: Number(out.slice(at + 1)), body: out.slice(0, at) });
    });
  });
}

/** A CSV of about `bytes` bytes written as a stream: id,value,label rows. */
async function writeCsv(path: string, bytes: number): Promise<{ rows: number; sum: number; max: number }> {
  const out = createWriteStream(path);
  let written = 0;
  let rows = 0;
  let sum = 0;
  const header = "id,value,label\n";
  out.write(header);
  written += header.length;
  while (written < bytes) {
    let block = "";
    for (let i = 0; i < 10_000; i++) {
      rows++;
      const value = rows % 1000;
      sum += value;
      block += `${rows},${value},"row ${rows}, quoted"\n`;
    }
    written += block.length;
    if (!out.write(block)) await new Promise<void>((resolve) => out.once("drain", () => resolve()));
  }
  await new Promise<void>((resolve, reject) => out.end((error?: Error | null) => (error ? reject(error) : resolve())));
  return { rows, sum, max: 999 };
}

function peakRssKb(pid: number): Promise<number> {
  return readFile(`/proc/${pid}/status`, "utf8").then((status) => Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? NaN));
}

const sha256Of = async (path: string) => createHash("sha256").update(await readFile(path)).digest("hex");

describe("a 50 MB upload analysed by data_analysis (synapse serve, SQLite)", () => {
  let serve: ServeProcess;
  let dir: string;
  let client: SynapseClient;

  beforeAll(async () => {
    dir = await tempDir("synapse-upload-");
    // A heap smaller than the file: the file, its text or its rows held whole would end the process.
    serve = await startServe(["--data-dir", join(dir, "agent"), "--max-file-size", String(5 * MB), "--log-level", "warn"], { NODE_OPTIONS: "--max-old-space-size=48" });
    client = await SynapseClient.connect({ baseUrl: serve.url, identity: await requesterIdentity(), retryBaseDelayMs: 50 });
  });
  afterAll(async () => {
    await serve?.stop();
  });

  it("streams the file into the store and the task reads it, under a heap smaller than the file", async () => {
    const path = join(dir, "big.csv");
    const expected = await writeCsv(path, 50 * MB);
    const before = await peakRssKb(serve.child.pid!);
    const token = await client.token();
    const uploaded = await curl(["-H", `Authorization: Bearer ${token}`, "-F", `file=@${path};type=text/csv`, `${serve.url}/upload`]);
    expect(uploaded.status).toBe(200);
    const answer = JSON.parse(uploaded.body) as { sha256: string; size: number; contentType: string; fileName: string };
    expect(answer).toEqual({ sha256: await sha256Of(path), size: (await readFile(path)).byteLength, contentType: "text/csv", fileName: "big.csv" });
    expect(answer.size).toBeGreaterThan(9 * Number(client.capabilities.maxFileSize));

    const done = await client.submit("data_analysis", {}, { uploads: [{ name: "csv", sha256: answer.sha256, size: answer.size }], waitMs: 50_000 });
    expect(done.task?.state).toBe(TaskState.COMPLETED);
    const output = fromValue(done.task?.result?.output) as { rows: number; columns: Record<string, { count: number; max: number; mean: number }> };
    expect(output.rows).toBe(expected.rows);
    expect(output.columns.value).toMatchObject({ count: expected.rows, max: expected.max, mean: Number((expected.sum / expected.rows).toFixed(6)) });
    expect(output.columns.label?.count).toBe(0);
    // Loosely: freed buffers the collector has not yet reclaimed and SQLite's page cache account
    // for most of the growth (about 90 MB here, not proportional to the file); a copy of the file
    // at any stage would add at least its size again.
    const grown = (await peakRssKb(serve.child.pid!)) - before;
    expect(grown * 1024).toBeLessThan(3 * answer.size);
  }, 55_000);

  it("`synapse upload URL FILE` prints NAME=SHA256:SIZE ready for --upload (--json too), and a task names it so", async () => {
    const path = join(dir, "small.csv");
    await writeFile(path, "x\n1\n2\n");
    const home = ["--home", join(dir, "cli-home")];
    const sha = await sha256Of(path);
    // By default the name is the file's name without its extension; --name chooses it.
    const text = await runCli(["upload", serve.url, path, ...home]);
    expect(text.code).toBe(0);
    expect(text.stdout).toBe(`small=${sha}:6\n`);
    const named = await runCli(["upload", serve.url, path, "--name", "csv", ...home]);
    expect(named.stdout).toBe(`csv=${sha}:6\n`);
    const json = await runCli(["upload", serve.url, path, "--name", "csv", "--json", ...home]);
    const answer = JSON.parse(json.stdout) as Record<string, unknown>;
    expect(answer).toMatchObject({ sha256: sha, size: 6, fileName: "small.csv", name: "csv", upload: `csv=${sha}:6` });
    expectProtoJsonNames(answer);
    const badName = await runCli(["upload", serve.url, path, "--name", "no spaces", ...home]);
    expect(badName.code).toBe(2);
    expect(badName.stderr).toContain("--name must be");
    // What it printed goes into --upload as it is.
    const submitted = await runCli(["submit", serve.url, "--type", "data_analysis", "--upload", named.stdout.trim(), "--wait", "--json", ...home]);
    expect(submitted.code).toBe(0);
    expect(JSON.parse(submitted.stdout).task.result.output).toMatchObject({ rows: 2, columns: { x: { count: 2, mean: 1.5 } } });
  }, 30_000);
});

describe("streaming into the store", () => {
  it("writes an upload's bytes to the store while its body is still arriving", async () => {
    const storage = memoryStorage();
    let stored = 0;
    const uploads: UploadStore = Object.assign(Object.create(storage.uploads) as UploadStore, {
      beginUpload: async (owner: string, nowMs: number) => {
        const writer = await storage.uploads.beginUpload(owner, nowMs);
        return { ...writer, write: async (bytes: Uint8Array) => ((stored += bytes.byteLength), writer.write(bytes)) };
      },
    });
    const server = await startTestServer({ storage: { ...storage, uploads } });
    try {
      const client = await connectClient(server);
      const boundary = "streaming-test";
      const request = http.request(`${server.url}/upload`, {
        method: "POST",
        headers: { Authorization: `Bearer ${await client.token()}`, "Content-Type": `multipart/form-data; boundary=${boundary}` },
      });
      const answered = new Promise<{ status: number; body: string }>((resolve, reject) => {
        request.on("response", (response) => {
          let body = "";
          response.on("data", (d: Buffer) => (body += d.toString()));
          response.on("end", () => resolve({ status: response.statusCode ?? 0, body }));
        });
        request.on("error", reject);
      });
      request.write(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="half.bin"\r\n\r\n`);
      const half = Buffer.alloc(4 * MB, 7);
      request.write(half);
      // The body is half sent and still open: the store already has most of it.
      const deadline = Date.now() + 10_000;
      while (stored < 3 * MB && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(stored).toBeGreaterThanOrEqual(3 * MB);
      request.end(Buffer.concat([half, Buffer.from(`\r\n--${boundary}--\r\n`)]));
      const { status, body } = await answered;
      expect(status).toBe(200);
      expect(JSON.parse(body)).toMatchObject({ size: 8 * MB, sha256: createHash("sha256").update(Buffer.concat([half, half])).digest("hex") });
    } finally {
      await server.close();
    }
  });
});

describe("upload refusals", () => {
  let server: TestServer;
  let client: SynapseClient;
  let tamper = false;

  beforeAll(async () => {
    const storage = memoryStorage();
    // A store whose bytes change under the agent once the test says so.
    const uploads: UploadStore = Object.assign(Object.create(storage.uploads) as UploadStore, {
      readUpload: async (owner: string, sha256: string, offset: number, length: number) => {
        const bytes = await storage.uploads.readUpload(owner, sha256, offset, length);
        if (!tamper || bytes.byteLength === 0) return bytes;
        const changed = Uint8Array.from(bytes);
        changed[0] = changed[0]! ^ 1;
        return changed;
      },
    });
    server = await startTestServer({ storage: { ...storage, uploads }, uploadLimits: { maxUploadBytes: 2 * MB, quotaBytes: 3 * MB } });
    client = await connectClient(server);
  });
  afterAll(async () => {
    await server?.close();
  });

  const upload = async (bytes: Uint8Array, as: SynapseClient = client) => {
    const path = join(await tempDir("synapse-upload-file-"), "data.csv");
    await writeFile(path, bytes);
    return uploadFile({ baseUrl: server.url, token: await as.token(), path }).catch((error: unknown) => ConnectError.from(error));
  };

  it("refuses a request without a token, or without a multipart body", async () => {
    const anonymous = await fetch(`${server.url}/upload`, { method: "POST", body: "x" });
    expect(anonymous.status).toBe(401);
    expect(await anonymous.json()).toMatchObject({ code: "unauthenticated" });
    const plain = await fetch(`${server.url}/upload`, { method: "POST", body: "x", headers: { Authorization: `Bearer ${await client.token()}` } });
    expect(plain.status).toBe(400);
    expect(await plain.json()).toMatchObject({ code: "invalid_argument", message: expect.stringContaining("multipart/form-data") });
    expect((await fetch(`${server.url}/upload`)).status).toBe(405);
  });

  it("refuses an upload over the limit (413) and beyond the sender's quota (429), typed", async () => {
    const tooLarge = await upload(new Uint8Array(2 * MB + 1));
    expect(tooLarge).toBeInstanceOf(ConnectError);
    expect(findErrorDetail(tooLarge)).toMatchObject({ protocolCode: "upload_too_large", details: { max_upload_bytes: 2 * MB } });
    const raw = await curlUpload(new Uint8Array(2 * MB + 1));
    expect(raw.status).toBe(413);
    expect(JSON.parse(raw.body)).toMatchObject({ code: "resource_exhausted" });

    expect(await upload(new Uint8Array(2 * MB).fill(1))).toMatchObject({ size: 2 * MB });
    const overQuota = await upload(new Uint8Array(2 * MB).fill(2));
    expect(findErrorDetail(overQuota)).toMatchObject({ protocolCode: "upload_quota_exceeded", details: { quota_bytes: 3 * MB } });
    // Another sender has a quota of its own.
    const other = await connectClient(server);
    expect(await upload(new Uint8Array(2 * MB).fill(2), other)).toMatchObject({ size: 2 * MB });
  });

  async function curlUpload(bytes: Uint8Array) {
    const path = join(await tempDir("synapse-upload-file-"), "big.bin");
    await writeFile(path, bytes);
    return curl(["-H", `Authorization: Bearer ${await client.token()}`, "-F", `file=@${path}`, `${server.url}/upload`]);
  }

  it("refuses a task naming an upload that is not the sender's, or not of that size", async () => {
    const mine = await upload(Buffer.from("v\n1\n"));
    if (mine instanceof ConnectError) throw mine;
    const stranger = await connectClient(server);
    for (const [who, reference] of [
      [stranger, { name: "csv", sha256: mine.sha256, size: mine.size }],
      [client, { name: "csv", sha256: mine.sha256, size: mine.size + 1 }],
      [client, { name: "csv", sha256: "0".repeat(64), size: 1 }],
    ] as const) {
      const refused = await who.submit("data_analysis", {}, { uploads: [reference] }).catch((error: unknown) => ConnectError.from(error));
      expect(refused).toBeInstanceOf(ConnectError);
      expect(findErrorDetail(refused)?.protocolCode).toBe("upload_not_found");
    }
    const malformed = await client.submit("data_analysis", {}, { uploads: [{ name: "bad name", sha256: mine.sha256, size: mine.size }] }).catch((error: unknown) => error);
    expect(findErrorDetail(malformed)?.protocolCode).toBe("invalid_params");
  });

  it("fails a task whose upload no longer matches its signed hash, before the handler reads it", async () => {
    const mine = await upload(Buffer.from("v\n1\n2\n3\n"));
    if (mine instanceof ConnectError) throw mine;
    tamper = true;
    try {
      const outcome = await client.submit("data_analysis", {}, { uploads: [{ name: "csv", sha256: mine.sha256, size: mine.size }], waitMs: 10_000 });
      expect(outcome.task).toMatchObject({ state: TaskState.FAILED, error: { code: ErrorCode.UPLOAD_MISMATCH } });
      // The handler never ran: no progress was reported.
      const types = [];
      for await (const item of client.watch(outcome.taskId)) if (item.kind === "event") types.push(item.event.type);
      expect(types).toEqual([MessageType.TASK_CONFIRM, MessageType.TASK_FAILED]);
    } finally {
      tamper = false;
    }
  });
});
