// A file named by a confidential task (docs/PROTOCOL.md §9.7): the requester
// seals it with the task key before the request exists, the executor's
// upload store (SQLite) holds only the sealed records, and the handler reads
// the plaintext opened record by record. A plaintext file or one sealed
// under another task's key fails the task with decryption_failed; the record
// code refuses a cut, reordered or renamed file.
import { createHash } from "node:crypto";
import { readdir, readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorCode } from "../gen/synapse/v1/errors_pb.js";
import { TaskState } from "../gen/synapse/v1/payloads_pb.js";
import { loadOrCreateIdentity } from "../src/agent/identity.js";
import type { SynapseClient } from "../src/client/requester.js";
import { uploadFile } from "../src/client/upload.js";
import { newTaskKey, openUpload, openUploadStream, RESULT_RECORD_BYTES, sealUpload } from "../src/envelope/confidential.js";
import { uuidV7 } from "../src/protocol/ids.js";
import { fromValue } from "../src/protocol/json-values.js";
import { findErrorDetail } from "../src/protocol/errors.js";
import { sqliteStorage } from "../src/store/sqlite/index.js";
import { runCli } from "./helpers/cli.js";
import { connectClient, requesterIdentity, startTestServer, tempDir, type TestServer } from "./helpers/server.js";

const ROWS = 9000;
let dataDir: string;
let csvPath: string;
let server: TestServer;
let storage: ReturnType<typeof sqliteStorage>;
let client: SynapseClient;
let requester: Awaited<ReturnType<typeof requesterIdentity>>;
const expected = { rows: ROWS, min: Infinity, max: -Infinity, sum: 0 };

beforeAll(async () => {
  dataDir = await tempDir("synapse-conf-upload-");
  const lines = ["codename,amount"];
  for (let i = 1; i <= ROWS; i++) {
    const amount = (i * 7919) % 100_003;
    expected.min = Math.min(expected.min, amount);
    expected.max = Math.max(expected.max, amount);
    expected.sum += amount;
    lines.push(`kestrelzq${i},${amount}`);
  }
  csvPath = join(await tempDir("synapse-conf-csv-"), "ledger.csv");
  await writeFile(csvPath, lines.join("\n") + "\n");
  storage = sqliteStorage(join(dataDir, "synapse.db"));
  server = await startTestServer({ identity: (await loadOrCreateIdentity(dataDir)).identity, storage });
  requester = await requesterIdentity();
  client = await connectClient(server, { identity: requester });
});
afterAll(async () => {
  await server.close();
  await storage.close();
});

describe("an upload named by a confidential task", () => {
  it("is sealed before it travels and read opened by the handler", async () => {
    const plaintext = await readFile(csvPath);
    expect(plaintext.byteLength).toBeGreaterThan(2 * RESULT_RECORD_BYTES); // several records, the last one short
    const taskId = uuidV7();
    const csv = await client.uploadConfidential(taskId, "csv", { path: csvPath, contentType: "text/csv" });
    const records = Math.ceil(plaintext.byteLength / RESULT_RECORD_BYTES);
    expect(csv.size).toBe(plaintext.byteLength + 16 * records);
    expect(csv.sha256).not.toBe(createHash("sha256").update(plaintext).digest("hex"));

    const { task } = await client.submit("data_analysis", {}, { taskId, confidential: true, uploads: [csv], waitMs: 15_000 });
    expect(task?.state).toBe(TaskState.COMPLETED);
    const opened = await client.getTask(taskId);
    const output = fromValue(opened.result?.output) as { rows: number; columns: Record<string, { count: number; min: number; max: number; mean: number }> };
    expect(output.rows).toBe(ROWS);
    expect(output.columns.amount).toEqual({ count: ROWS, min: expected.min, max: expected.max, mean: Number((expected.sum / ROWS).toFixed(6)) });
    expect(output.columns.codename?.count).toBe(0);
  });

  it("leaves no plaintext of the file in the executor's database files", async () => {
    await server.close();
    await storage.close();
    const files = (await readdir(dataDir)).filter((name) => name.startsWith("synapse.db"));
    expect(files.length).toBeGreaterThan(0);
    let found = 0;
    for (const name of files) {
      const bytes = await readFile(join(dataDir, name));
      found += bytes.byteLength;
      for (const secret of ["codename,amount", "kestrelzq1,", `kestrelzq${ROWS},`]) expect(bytes.includes(Buffer.from(secret)), `${secret} in ${name}`).toBe(false);
    }
    // The sealed file is in there: the files are larger than it.
    expect(found).toBeGreaterThan((await readFile(csvPath)).byteLength);
    // Read again after a restart; then the refusals (one of them stores a file in the clear).
    storage = sqliteStorage(join(dataDir, "synapse.db"));
    server = await startTestServer({ identity: (await loadOrCreateIdentity(dataDir)).identity, storage });
    client = await connectClient(server, { identity: requester });
  });

  it("fails the task with decryption_failed when the file was uploaded in the clear", async () => {
    const plain = await uploadFile({ baseUrl: server.url, token: await client.token(), path: csvPath, contentType: "text/csv" });
    const { task } = await client.submit("data_analysis", {}, { confidential: true, uploads: [{ name: "csv", sha256: plain.sha256, size: plain.size }], waitMs: 15_000 });
    expect(task?.state).toBe(TaskState.FAILED);
    expect((await client.getTask(task!.taskId)).error?.code).toBe(ErrorCode.DECRYPTION_FAILED);
  });

  it("fails the task with decryption_failed when the file was sealed for another task", async () => {
    const other = await client.uploadConfidential(uuidV7(), "csv", { path: csvPath, contentType: "text/csv" });
    const { task } = await client.submit("data_analysis", {}, { confidential: true, uploads: [other], waitMs: 15_000 });
    expect(task?.state).toBe(TaskState.FAILED);
    expect((await client.getTask(task!.taskId)).error?.code).toBe(ErrorCode.DECRYPTION_FAILED);
  });
});

describe("the command line", () => {
  it("`synapse upload --confidential --task-id ID` seals the file with a key kept in --home until `synapse submit --confidential --task-id ID` sends it", async () => {
    const home = await tempDir("synapse-conf-cli-");
    const taskId = uuidV7();
    const uploaded = await runCli(["upload", server.url, csvPath, "--name", "csv", "--confidential", "--task-id", taskId, "--home", home]);
    expect(uploaded.stderr).toBe("");
    expect(uploaded.code).toBe(0);
    const plaintext = await readFile(csvPath);
    const [, sha256, size] = /^csv=([0-9a-f]{64}):(\d+)\n$/.exec(uploaded.stdout) ?? [];
    expect(Number(size)).toBe(plaintext.byteLength + 16 * Math.ceil(plaintext.byteLength / RESULT_RECORD_BYTES));
    expect(sha256).not.toBe(createHash("sha256").update(plaintext).digest("hex"));
    const keyFile = join(home, "tasks", `${taskId}.key`);
    expect((await stat(keyFile)).mode & 0o777).toBe(0o600);

    const submitted = await runCli(["submit", server.url, "--type", "data_analysis", "--confidential", "--task-id", taskId, "--upload", uploaded.stdout.trim(), "--wait", "--json", "--home", home]);
    expect(submitted.stderr).toBe("");
    expect(submitted.code).toBe(0);
    const output = JSON.parse(submitted.stdout).task.result.output as { rows: number; columns: Record<string, { max: number }> };
    expect(output.rows).toBe(ROWS);
    expect(output.columns.amount?.max).toBe(expected.max);
    // The request carries the key now (wrapped): the file is gone.
    await expect(stat(keyFile)).rejects.toMatchObject({ code: "ENOENT" });

    const alone = await runCli(["upload", server.url, csvPath, "--confidential", "--home", home]);
    expect(alone.code).toBe(2);
    expect(alone.stderr).toContain("--confidential needs --task-id");
  }, 60_000);
});

describe("upload records", () => {
  const key = newTaskKey();
  const data = Buffer.alloc(2 * RESULT_RECORD_BYTES + 100, 0x61);
  const sealed = sealUpload(key, "csv", data);
  const step = RESULT_RECORD_BYTES + 16;
  const code = (fn: () => unknown) => {
    try {
      fn();
    } catch (error) {
      return findErrorDetail(error)?.protocolCode;
    }
    return "opened";
  };

  it("open whole or as a stream in chunks of any size", async () => {
    expect(Buffer.from(openUpload(key, "csv", sealed)).equals(data)).toBe(true);
    async function* chunks(size: number) {
      for (let at = 0; at < sealed.byteLength; at += size) yield sealed.subarray(at, at + size);
    }
    for (const size of [1000, step, step + 1, sealed.byteLength]) {
      const parts = [];
      for await (const part of openUploadStream(key, "csv", chunks(size))) parts.push(part);
      expect(Buffer.concat(parts).equals(data)).toBe(true);
    }
    expect(Buffer.from(openUpload(key, "csv", sealUpload(key, "csv", new Uint8Array(0)))).byteLength).toBe(0);
  });

  it("refuse a cut, a reordered or a renamed file, and another key", () => {
    expect(code(() => openUpload(key, "csv", sealed.subarray(0, 2 * step)))).toBe("decryption_failed");
    const swapped = Buffer.concat([sealed.subarray(step, 2 * step), sealed.subarray(0, step), sealed.subarray(2 * step)]);
    expect(code(() => openUpload(key, "csv", swapped))).toBe("decryption_failed");
    expect(code(() => openUpload(key, "data", sealed))).toBe("decryption_failed");
    expect(code(() => openUpload(newTaskKey(), "csv", sealed))).toBe("decryption_failed");
    expect(code(() => openUpload(key, "csv", sealed))).toBe("opened");
  });
});
