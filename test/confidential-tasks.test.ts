// Confidential tasks end to end through a real server on SQLite: a
// requester makes a task confidential, answers a question and reads a
// streamed result; every event it gets is sealed, GetTask shows no content,
// the database file holds none of it, a restart reads it back, and each way
// of getting it wrong is refused with its code.
import { create, fromBinary } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EnvelopeSchema, HeaderSchema, MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { ErrorDetailSchema } from "../gen/synapse/v1/errors_pb.js";
import { P2PService } from "../gen/synapse/v1/p2p_pb.js";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { TaskCancelPayloadSchema, TaskInfoProvidedPayloadSchema, TaskState, type TaskNeedInfoPayload } from "../gen/synapse/v1/payloads_pb.js";
import { loadOrCreateIdentity } from "../src/agent/identity.js";
import type { SynapseClient } from "../src/client/requester.js";
import { fromValue } from "../src/protocol/json-values.js";
import { sqliteStorage } from "../src/store/sqlite/index.js";
import { connectClient, requesterIdentity, startTestServer, tempDir, type TestServer } from "./helpers/server.js";

const SECRET_TEXT = "Quartermaster Veldt moves the reserve north at dawn. The bridge at Orsk is mined. Nobody outside the council may know.";
const SECRET_CSV = "codename,amount\nbluefinch,48213\nredheron,99127\n";

let dataDir: string;
let server: TestServer;
let storage: ReturnType<typeof sqliteStorage>;
let client: SynapseClient;

async function protocolCode(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    return ConnectError.from(error).findDetails(ErrorDetailSchema)[0]?.protocolCode ?? String(error);
  }
  return "accepted";
}

async function start() {
  const identity = (await loadOrCreateIdentity(dataDir)).identity;
  storage = sqliteStorage(join(dataDir, "synapse.db"));
  return startTestServer({
    identity,
    storage,
    capabilities: { supportedTaskTypes: undefined },
  });
}

beforeAll(async () => {
  dataDir = await tempDir("synapse-confidential-");
  server = await start();
  client = await connectClient(server, { identity: await requesterIdentity() });
});
afterAll(async () => {
  await server.close();
  await storage.close();
});

describe("a confidential task", () => {
  let summaryTask = "";
  let rowsTask = "";

  it("asks its question sealed, takes the answer sealed, and completes", async () => {
    const { taskId, reply } = await client.submit("summarization", { text: SECRET_TEXT }, { confidential: true, waitMs: 5000 });
    summaryTask = taskId;
    expect(reply?.type).toBe(MessageType.TASK_NEED_INFO);
    expect(reply?.header.confidential?.taskKeyId).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect((reply?.payload as TaskNeedInfoPayload).missingFields.map((f) => f.field)).toEqual(["max_sentences"]);

    const answered = await client.provideInfo(taskId, { max_sentences: 2 }, { waitMs: 5000 });
    expect(answered.task?.state).toBe(TaskState.COMPLETED);
    const task = await client.getTask(taskId);
    expect(task.state).toBe(TaskState.COMPLETED);
    const output = fromValue(task.result?.output) as { summary: string; sentences: string[] };
    expect(output.sentences).toHaveLength(2);
    expect(output.summary).toContain("Veldt");
  });

  it("streams its result sealed, and the requester opens it", async () => {
    const { taskId, task } = await client.submit("data_analysis", { csv: SECRET_CSV, include_rows: true }, { confidential: true, waitMs: 5000 });
    rowsTask = taskId;
    expect(task?.state).toBe(TaskState.COMPLETED);
    const opened = await client.getTask(taskId);
    const stream = opened.result!.stream!;
    const bytes = await client.readResult(taskId, { expected: stream });
    const parsed = JSON.parse(Buffer.from(bytes).toString("utf8")) as { parsed_rows: Array<Record<string, unknown>> };
    expect(parsed.parsed_rows.map((row) => row.codename)).toEqual(["bluefinch", "redheron"]);
    // What travelled is sealed records: 16 bytes of tag more than the plaintext.
    expect(Number(stream.totalSize)).toBe(bytes.byteLength + 16);
  });

  it("wakes a handler that asks a person mid-run with the sealed decision, and completes", async () => {
    const { taskId, task } = await client.submit("text_analysis", { text: "Approve the sealed plan. Then run it.", require_approval: true }, { confidential: true, waitMs: 5000 });
    expect(task?.state).toBe(TaskState.NEED_HUMAN);
    await client.acknowledge(taskId);
    const decided = await client.decide(taskId, { action: "approve" }, { waitMs: 5000 });
    expect(decided.task?.state).toBe(TaskState.COMPLETED);
    expect(fromValue((await client.getTask(taskId)).result?.output)).toMatchObject({ sentences: 2 });
  });

  it("shows no content in GetTask or in the events' views, to anyone", async () => {
    const raw = await fetch(`${server.url}/synapse.v1.P2PService/GetTask`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${await client.token()}` },
      body: JSON.stringify({ taskId: summaryTask }),
    }).then((response) => response.text());
    expect(raw).toContain('"confidential"');
    expect(raw).not.toContain("Veldt");
    expect(raw).not.toContain("max_sentences");
    const watched = await fetch(`${server.url}/synapse.v1.P2PService/GetTask`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${await client.token()}` },
      body: JSON.stringify({ taskId: rowsTask }),
    }).then((response) => response.text());
    expect(watched).not.toContain("bluefinch");
    // Over gRPC (binary) too, where a result's bytes would be placed as they are: no content fields at all.
    const raw2 = createClient(P2PService, createGrpcTransport({ baseUrl: server.url }));
    for (const id of [summaryTask, rowsTask]) {
      const { task } = await raw2.getTask({ taskId: id }, { headers: { authorization: `Bearer ${await client.token()}` } });
      expect(task?.confidential).toBeDefined();
      expect([task?.result, task?.request, task?.pendingInfo, task?.error]).toEqual([undefined, undefined, undefined, undefined]);
      expect(task?.statusMessage).toBe("");
    }
  });

  it("leaves none of its content in the database files", async () => {
    await server.close();
    await storage.close();
    const files = (await readdir(dataDir)).filter((name) => name.startsWith("synapse.db"));
    expect(files.length).toBeGreaterThan(0);
    for (const name of files) {
      const bytes = await readFile(join(dataDir, name));
      for (const secret of ["Veldt", "Orsk", "council", "bluefinch", "48213", "redheron", "max_sentences\":2"]) {
        expect(bytes.includes(Buffer.from(secret)), `${secret} in ${name}`).toBe(false);
      }
    }
    server = await start();
    client = await connectClient(server, { identity: (client as unknown as { options: { identity: never } }).options.identity });
  });

  it("is read back after a restart, with the key unwrapped from the store", async () => {
    const task = await client.getTask(summaryTask);
    expect(task.state).toBe(TaskState.COMPLETED);
    expect((fromValue(task.result?.output) as { summary: string }).summary).toContain("Orsk");
  });
});

describe("refusals", () => {
  it("refuses a plaintext message on a confidential task with confidentiality_required", async () => {
    const { taskId } = await client.submit("summarization", { text: SECRET_TEXT }, { confidential: true, waitMs: 5000 });
    // Another client of the same requester, which has not read the task: its envelope is plaintext.
    const other = await connectClient(server, { identity: (client as unknown as { options: { identity: never } }).options.identity });
    const plain = other.envelope(MessageType.TASK_INFO_PROVIDED, create(TaskInfoProvidedPayloadSchema, { taskId, fields: { max_sentences: 1 } }), { taskId });
    expect(fromBinary(HeaderSchema, plain.header).confidential).toBeUndefined();
    const raw = createClient(P2PService, createGrpcTransport({ baseUrl: server.url }));
    expect(await protocolCode(raw.send({ envelope: plain }))).toBe("confidentiality_required");
    // Through the client's own call, the task's key is learnt from its view first, and the answer goes sealed.
    expect((await other.provideInfo(taskId, { max_sentences: 1 }, { waitMs: 5000 })).task?.state).toBe(TaskState.COMPLETED);
  });

  it("refuses a sealed message whose header was changed with decryption_failed", async () => {
    // A task that runs a while (a pause after each row), so that a cancel is still allowed.
    const { taskId } = await client.submit("data_analysis", { csv: SECRET_CSV, delay_ms_per_row: 2000 }, { confidential: true });
    const sealed = client.envelope(MessageType.TASK_CANCEL, create(TaskCancelPayloadSchema, { taskId }), { taskId });
    expect(fromBinary(HeaderSchema, sealed.header).confidential).toBeDefined();
    const changed = Buffer.from(sealed.header);
    changed[changed.indexOf(Buffer.from("1.0.0")) + 4] = "1".charCodeAt(0); // protocol_version 1.0.1: valid, but not what was sealed
    const raw = createClient(P2PService, createGrpcTransport({ baseUrl: server.url }));
    expect(await protocolCode(raw.send({ envelope: create(EnvelopeSchema, { ...sealed, header: changed }) }))).toBe("decryption_failed");
    // The same message unchanged is taken: the refusal was the change's.
    expect(await protocolCode(raw.send({ envelope: sealed }))).toBe("accepted");
  });
});
