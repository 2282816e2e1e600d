// Confidential tasks in the console, in Chromium: the page's own WebCrypto
// HPKE and §9 opening and sealing checked against
// test/vectors/confidential.json inside the console page (each positive
// vector opened with the vectors' private keys imported into WebCrypto, each
// negative one refused with its code); then the console submits a
// confidential summarization, answers its question, sees it complete with
// every event opened and verified, reads it again after a reload (the task
// key unwrapped with its X25519 key from IndexedDB), opens a sealed result
// stream, takes up and approves a decision and cancels a confidential task;
// and the server's GetTask JSON of
// each holds none of their content. Needs Chromium and a built console.
import { build } from "esbuild";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentIdentity } from "../../src/agent/identity.js";
import type { SynapseClient } from "../../src/client/requester.js";
import { connectClient, requesterIdentity, startTestServer, type TestServer } from "../helpers/server.js";
import { launchChromium, openConsole, screenshot, type ConsolePage } from "./harness.js";

const TIMEOUT = 20_000;
const SECRET = "Quartermaster Veldt moves the reserve north at dawn. The bridge at Orsk is mined. Nobody outside the council may know.";
const SECRET_CSV = "codename,amount\nbluefinch,48213\nredheron,99127\n";
const vectors = JSON.parse(readFileSync(join(process.cwd(), "test", "vectors", "confidential.json"), "utf8")) as unknown;

/**
 * The console's own confidential modules (src/console/confidential.ts and
 * hpke.ts) bundled for the page, exposed as one global: the code that runs is
 * the console's, in Chromium's WebCrypto.
 */
async function consoleModules(): Promise<string> {
  const root = process.cwd();
  const result = await build({
    stdin: {
      contents: `
        export * as confidential from "./src/console/confidential.ts";
        export * as hpke from "./src/console/hpke.ts";
        export { envelopeSigningInput } from "./src/envelope/pae.ts";
        export { fromBinary, toBinary, toJson } from "@bufbuild/protobuf";
        export { EnvelopeSchema, HeaderSchema } from "./gen/synapse/v1/envelope_pb.ts";
        export { SignedEncryptionKeySchema } from "./gen/synapse/v1/confidential_pb.ts";
        export { messageTypeInfo } from "./src/protocol/message-types.ts";
        export { default as nacl } from "tweetnacl";
      `,
      resolveDir: root,
      loader: "ts",
    },
    bundle: true,
    write: false,
    format: "iife",
    globalName: "synapseConfidential",
    platform: "browser",
    target: "es2022",
    tsconfig: join(root, "src", "console", "tsconfig.json"),
    logLevel: "silent",
  });
  // Evaluated as a script, not a module: the global is named once the bundle has run.
  return `${result.outputFiles[0]!.text};globalThis.synapseConfidential = synapseConfidential;`;
}

interface VectorReport {
  positive: Array<{ name: string; outcome: string; payloadHex?: string; payloadJson?: unknown; innerSignatureOk?: boolean; taskKeyId?: string }>;
  negative: Array<{ name: string; expected: string; outcome: string }>;
  bindings: Array<{ agent: string; keyId: string; movedRefused: string }>;
  bindingByOutsider: string;
  result: { sealedSize: number; sealedSha256: string; lastRecordHex: string; opened: boolean; cutRefused: string; otherTaskRefused: string };
  wrapRoundTrip: { opened: boolean; otherAgentRefused: string };
}

/** Runs in the page: every vector through the console's modules. (A string: this file is compiled without the DOM's types.) */
const CHECK_VECTORS = `async (vectors) => {
  const m = globalThis.synapseConfidential;
  const { confidential: c, hpke } = m;
  const hex = (text) => Uint8Array.from(text.match(/../g) ?? [], (byte) => parseInt(byte, 16));
  const toHex = (bytes) => Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
  const taskKey = hex(vectors.task_key_hex);
  const parties = Object.values(vectors.parties);
  const codeOf = async (promise) => {
    try { await promise; return "opened"; } catch (error) { return error instanceof c.ConfidentialRefusal ? error.code : "other: " + String(error); }
  };
  const pairOf = async (party) => ({ privateKey: await hpke.importX25519Private(hex(party.x25519_private_key)), publicKey: hex(party.x25519_public_key), keyId: party.encryption_key_id });
  const openAs = async (opener, envelope) => {
    const party = vectors.parties[opener];
    const pair = await pairOf(party);
    return c.openEnvelope(envelope, {
      self: party.agent_id,
      taskKey: async (header) => (header.confidential.keys.length > 0 ? c.unwrapRequestKey(header, party.agent_id, pair) : taskKey),
      signerKey: (header) => { const signer = parties.find((p) => p.key_id === header.sender?.keyId); return signer && hex(signer.ed25519_public_key); },
    });
  };
  // As one who holds the task key could: the same header and nonce, another inner signature.
  const resealed = async (envelope, signature) => {
    const header = m.fromBinary(m.HeaderSchema, envelope.header);
    const { payload } = await c.openSealedPayload(envelope.header, header, envelope.payload, taskKey);
    return { ...envelope, payload: await c.sealPayload(envelope.header, header, signature, payload, taskKey) };
  };
  const report = { positive: [], negative: [], bindings: [] };
  for (const vector of vectors.positive) {
    try {
      const opened = await openAs(vector.opener, m.fromBinary(m.EnvelopeSchema, hex(vector.envelope_hex)));
      const schema = m.messageTypeInfo(opened.type).payloadSchema;
      const signer = parties.find((p) => p.key_id === opened.header.sender.keyId);
      report.positive.push({
        name: vector.name,
        outcome: "opened",
        payloadHex: toHex(m.toBinary(schema, opened.payload)),
        payloadJson: m.toJson(schema, opened.payload),
        innerSignatureOk: toHex(opened.plain.signature.value) === vector.inner_signature_hex
          && m.nacl.sign.detached.verify(m.envelopeSigningInput(opened.plain.header, opened.plain.payload), opened.plain.signature.value, hex(signer.ed25519_public_key)),
        taskKeyId: opened.header.confidential.taskKeyId,
      });
    } catch (error) {
      report.positive.push({ name: vector.name, outcome: error instanceof c.ConfidentialRefusal ? error.code : String(error) });
    }
  }
  for (const vector of vectors.negative) {
    let envelope = m.fromBinary(m.EnvelopeSchema, hex(vector.envelope_hex));
    if (vector.zero_signature) envelope = await resealed(envelope, new Uint8Array(64));
    if (vector.resign_with_seed !== undefined) {
      const header = m.fromBinary(m.HeaderSchema, envelope.header);
      const { payload } = await c.openSealedPayload(envelope.header, header, envelope.payload, taskKey);
      const { secretKey } = m.nacl.sign.keyPair.fromSeed(hex(vector.resign_with_seed));
      envelope = await resealed(envelope, m.nacl.sign.detached(m.envelopeSigningInput(envelope.header, payload), secretKey));
    }
    report.negative.push({ name: vector.name, expected: vector.expected_error, outcome: await codeOf(openAs(vector.opener, envelope)) });
  }
  for (const party of parties) {
    const signed = m.fromBinary(m.SignedEncryptionKeySchema, hex(party.encryption_key_binding_hex));
    const binding = await c.verifyEncryptionKey(signed, party.agent_id, hex(party.ed25519_public_key));
    report.bindings.push({ agent: party.agent_id, keyId: binding.keyId, movedRefused: await codeOf(c.verifyEncryptionKey(signed, "agent_someone_else", hex(party.ed25519_public_key))) });
  }
  const executor = vectors.parties.executor;
  report.bindingByOutsider = await codeOf(c.verifyEncryptionKey(m.fromBinary(m.SignedEncryptionKeySchema, hex(executor.encryption_key_binding_hex)), executor.agent_id, hex(vectors.parties.outsider.ed25519_public_key)));
  const plaintext = Uint8Array.from({ length: vectors.result.result_size }, (_, i) => i % 251);
  const sealed = await c.sealResult(taskKey, vectors.result.task_id, plaintext);
  const opened = await c.openResult(taskKey, vectors.result.task_id, sealed);
  report.result = {
    sealedSize: sealed.byteLength,
    sealedSha256: toHex(new Uint8Array(await crypto.subtle.digest("SHA-256", sealed))),
    lastRecordHex: toHex(sealed.subarray(65552)),
    opened: opened.byteLength === plaintext.byteLength && opened.every((byte, i) => byte === plaintext[i]),
    cutRefused: await codeOf(c.openResult(taskKey, vectors.result.task_id, sealed.subarray(0, 65552))),
    otherTaskRefused: await codeOf(c.openResult(taskKey, "another-task", sealed)),
  };
  // A key wrapped here opens with the recipient's key, and not as another agent.
  const requester = vectors.parties.requester;
  const parties2 = { taskId: vectors.task_id, sender: { agentId: requester.agent_id, keyId: requester.key_id }, recipient: { agentId: executor.agent_id, keyId: executor.encryption_key_id } };
  const wrapped = await c.wrapTaskKey(taskKey, parties2, hex(executor.x25519_public_key));
  const confidentiality = { suite: c.SUITE, taskKeyId: vectors.task_key_id, nonce: new Uint8Array(12), keys: [wrapped] };
  const unwrapped = await c.unwrapTaskKey(confidentiality, vectors.task_id, parties2.sender, executor.agent_id, await pairOf(executor));
  report.wrapRoundTrip = {
    opened: toHex(unwrapped) === vectors.task_key_hex,
    otherAgentRefused: await codeOf(c.unwrapTaskKey(confidentiality, vectors.task_id, parties2.sender, vectors.parties.outsider.agent_id, await pairOf(vectors.parties.outsider))),
  };
  return report;
}`;

describe("confidential tasks in the console, in Chromium", () => {
  let server: TestServer;
  let operator: AgentIdentity;
  let reader: SynapseClient;
  let browser: Browser;
  let session: ConsolePage;
  let page: Page;
  const tasks = { summary: "", rows: "" };

  beforeAll(async () => {
    operator = await requesterIdentity();
    server = await startTestServer({ agentId: "agent_console_confidential", operators: [operator.key.keyId] });
    reader = await connectClient(server, { identity: operator });
    browser = await launchChromium();
    session = await openConsole(browser, server.url);
    page = session.page;
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  /** The server's GetTask answer, as JSON on the wire (read with the operator key). */
  async function getTaskJson(taskId: string): Promise<string> {
    const response = await fetch(`${server.url}/synapse.v1.P2PService/GetTask`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${await reader.token()}` },
      body: JSON.stringify({ taskId }),
    });
    expect(response.status).toBe(200);
    return response.text();
  }

  async function submitConfidential(taskType: string, payload: object, options: { approval?: boolean } = {}): Promise<string> {
    await page.locator('nav a[data-route="new"]').click();
    await page.getByTestId("task-type").selectOption(taskType);
    await page.getByTestId("task-payload").fill(JSON.stringify(payload));
    if (options.approval) await page.getByTestId("require-approval").check();
    await page.getByTestId("confidential").check();
    const before = await page.getByTestId("submit-status").getAttribute("data-task-id");
    await page.getByTestId("submit-task").click();
    const status = page.locator('[data-testid="submit-status"][data-task-id]');
    await expect.poll(async () => (await status.count()) > 0 && (await status.getAttribute("data-task-id")) !== before, { timeout: TIMEOUT }).toBe(true);
    const taskId = (await status.getAttribute("data-task-id")) ?? "";
    expect(await status.textContent()).toContain("(confidential)");
    await page.locator(`[data-testid="task-detail"][data-task-id="${taskId}"] [data-testid="task-id"]`).waitFor({ timeout: TIMEOUT });
    return taskId;
  }

  const graphReaches = (state: string) => page.locator(`[data-testid="state-graph"][data-current="${state}"]`).waitFor({ timeout: TIMEOUT });

  async function events(): Promise<Array<{ sequence: string | null; type: string | null; verified: string | null; sealed: string | null }>> {
    return page.getByTestId("event").evaluateAll((rows) =>
      rows.map((row) => ({ sequence: row.getAttribute("data-sequence"), type: row.getAttribute("data-type"), verified: row.getAttribute("data-verified"), sealed: row.getAttribute("data-sealed") })),
    );
  }

  /** Every event of the open task opened and verified, in sequence, and the log's verdict says so. */
  async function allOpenedAndVerified(): Promise<string[]> {
    await expect.poll(() => page.getByTestId("log-verdict").getAttribute("data-all-verified"), { timeout: TIMEOUT }).toBe("true");
    const rows = await events();
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.map((row) => row.sequence)).toEqual(rows.map((_, index) => String(index + 1)));
    for (const row of rows) expect(row).toMatchObject({ verified: "true", sealed: "true" });
    return rows.map((row) => row.type ?? "");
  }

  it("opens the confidential vectors with the page's WebCrypto, and refuses each negative one with its code", async () => {
    await page.evaluate(await consoleModules());
    const report = (await page.evaluate(`(${CHECK_VECTORS})(${JSON.stringify(vectors)})`)) as VectorReport;
    const expected = vectors as { task_key_id: string; positive: Array<{ name: string; plaintext_payload_hex: string; payload: unknown }>; negative: Array<{ name: string; expected_error: string }>; result: { sealed_size: number; sealed_sha256: string; last_record_hex: string } };
    expect(report.positive.map((entry) => entry.name)).toEqual(expected.positive.map((vector) => vector.name));
    for (const [i, vector] of expected.positive.entries()) {
      expect(report.positive[i]).toEqual({ name: vector.name, outcome: "opened", payloadHex: vector.plaintext_payload_hex, payloadJson: vector.payload, innerSignatureOk: true, taskKeyId: expected.task_key_id });
    }
    expect(report.negative).toEqual(expected.negative.map((vector) => ({ name: vector.name, expected: vector.expected_error, outcome: vector.expected_error })));
    expect(report.negative.length).toBe(9);
    for (const binding of report.bindings) expect(binding.movedRefused).toBe("encryption_key_unknown");
    expect(report.bindings.map((binding) => binding.keyId)).toEqual(Object.values((vectors as { parties: Record<string, { encryption_key_id: string }> }).parties).map((party) => party.encryption_key_id));
    expect(report.bindingByOutsider).toBe("encryption_key_unknown");
    expect(report.result).toEqual({
      sealedSize: expected.result.sealed_size,
      sealedSha256: expected.result.sealed_sha256,
      lastRecordHex: expected.result.last_record_hex,
      opened: true,
      cutRefused: "decryption_failed",
      otherTaskRefused: "decryption_failed",
    });
    expect(report.wrapRoundTrip).toEqual({ opened: true, otherAgentRefused: "encryption_key_unknown" });
  });

  it("keeps a non-extractable X25519 key beside its identity", async () => {
    await page.locator('nav a[data-route="identity"]').click();
    expect(await page.getByTestId("encryption-key").getAttribute("data-available")).toBe("true");
    expect(await page.getByTestId("encryption-key-id").textContent()).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const stored = await page.evaluate(`(async () => {
      const db = await new Promise((resolve, reject) => {
        const req = indexedDB.open("synapse-console");
        req.onsuccess = () => resolve(req.result);
        req.onerror = () => reject(req.error);
      });
      const record = await new Promise((resolve, reject) => {
        const req = db.transaction("kv").objectStore("kv").get("identity");
        req.onsuccess = () => resolve(req.result);
        req.onerror = () => reject(req.error);
      });
      const key = record.encryption.privateKey;
      const exported = await crypto.subtle.exportKey("pkcs8", key).then(() => "exported", (error) => error.name);
      return { algorithm: key.algorithm.name, extractable: key.extractable, exported };
    })()`);
    expect(stored).toEqual({ algorithm: "X25519", extractable: false, exported: "InvalidAccessError" });
  });

  it("submits a confidential summarization, answers its question sealed, and sees it complete, every event opened and verified", async () => {
    const taskId = await submitConfidential("summarization", { text: SECRET });
    tasks.summary = taskId;
    await graphReaches("info_needed");
    const detail = page.getByTestId("task-detail");
    expect(await detail.getByTestId("task-confidential").textContent()).toContain("opened in this browser");
    // The question came sealed: only an opened need_info can name the field it asks for.
    const input = detail.locator('input[data-field="max_sentences"]');
    await input.waitFor({ timeout: TIMEOUT });
    await input.fill("2");
    await detail.getByTestId("provide-info").click();
    await graphReaches("completed");
    const types = await allOpenedAndVerified();
    expect(types[0]).toBe("p2p:task_need_info");
    expect(types.at(-1)).toBe("p2p:task_complete");
    const path = await page.getByTestId("state-path").locator("li[data-state]").evaluateAll((items) => items.map((item) => item.getAttribute("data-state") ?? ""));
    expect(path).toEqual(expect.arrayContaining(["pending", "info_needed", "info_provided", "completed"]));
    const result = JSON.parse((await page.getByTestId("task-result").textContent()) ?? "") as { summary?: string; sentences?: string[] };
    expect(result.sentences).toHaveLength(2);
    expect(result.summary).toContain("Veldt");
    expect(await page.getByTestId("task-result-panel").getAttribute("data-signed")).toBe("true");
    await screenshot(page, "confidential-01-completed");

    // What the server shows anyone: the wrapped keys, and none of the content.
    const raw = await getTaskJson(taskId);
    expect(raw).toContain('"confidential"');
    expect(raw).toContain('"state":"TASK_STATE_COMPLETED"');
    for (const secret of ["Veldt", "Orsk", "council", "max_sentences", "summary"]) expect(raw, secret).not.toContain(secret);
  });

  it("reads the task again after a reload, the task key unwrapped from GetTask with its X25519 key", async () => {
    await page.reload();
    await page.locator('[data-testid="status"][data-ready="true"]').waitFor({ timeout: TIMEOUT });
    await page.goto(`${server.url}/console#/tasks/${tasks.summary}`);
    await graphReaches("completed");
    await allOpenedAndVerified();
    expect(JSON.parse((await page.getByTestId("task-result").textContent()) ?? "").summary).toContain("Veldt");
  });

  it("downloads a confidential result stream and opens its sealed records", async () => {
    tasks.rows = await submitConfidential("data_analysis", { csv: SECRET_CSV, include_rows: true });
    await graphReaches("completed");
    await allOpenedAndVerified();
    await page.getByTestId("result-download").click();
    const check = page.locator('[data-testid="result-check"][data-ok]');
    await check.waitFor({ timeout: TIMEOUT });
    expect(await check.getAttribute("data-ok")).toBe("true");
    expect(await check.getAttribute("data-opened")).toBe("true");
    expect(await check.textContent()).toContain("sealed bytes match the signed task_complete");
    expect(await page.getByTestId("result-preview").textContent()).toContain("bluefinch");
    const raw = await getTaskJson(tasks.rows);
    for (const secret of ["bluefinch", "48213", "redheron", "codename"]) expect(raw, secret).not.toContain(secret);
    await screenshot(page, "confidential-02-result-stream");
  });

  it("takes up and approves a confidential task's decision, sealed", async () => {
    const taskId = await submitConfidential("text_analysis", { text: "Approve the secret plan. Then run it." }, { approval: true });
    await graphReaches("need_human");
    const question = page.getByTestId("task-detail").getByTestId("question");
    expect(await question.getAttribute("data-kind")).toBe("decision");
    await question.getByTestId("take-up").click();
    await graphReaches("human_deciding");
    await page.getByTestId("task-detail").getByTestId("question").getByTestId("approve").click();
    await graphReaches("completed");
    const path = await page.getByTestId("state-path").locator("li[data-state]").evaluateAll((items) => items.map((item) => item.getAttribute("data-state") ?? ""));
    expect(path).toEqual(expect.arrayContaining(["need_human", "human_deciding", "human_approved", "completed"]));
    const types = await allOpenedAndVerified();
    expect(types).toEqual(expect.arrayContaining(["p2p:task_need_human", "p2p:task_ack", "p2p:task_complete"]));
    expect(JSON.parse((await page.getByTestId("task-result").textContent()) ?? "")).toMatchObject({ sentences: 2 });
    const raw = await getTaskJson(taskId);
    expect(raw).toContain('"state":"TASK_STATE_COMPLETED"');
    expect(raw).not.toContain("secret plan");
  });

  it("cancels a confidential task with a sealed task_cancel", async () => {
    const taskId = await submitConfidential("summarization", { text: "Cancel this one. It is secret too." });
    await graphReaches("info_needed");
    await page.getByTestId("task-detail").getByTestId("cancel-task").click();
    await graphReaches("cancelled");
    await allOpenedAndVerified();
    const raw = await getTaskJson(taskId);
    expect(raw).toContain('"state":"TASK_STATE_CANCELLED"');
    expect(raw).not.toContain("secret too");
  });

  it("says plainly, in a browser without X25519 in WebCrypto, that confidential tasks stay sealed", async () => {
    // WebCrypto as a browser without X25519 has it: the algorithm is not supported.
    const withoutX25519 = `(() => {
      const subtle = crypto.subtle;
      const unsupported = (algorithm) => (typeof algorithm === "string" ? algorithm : algorithm?.name) === "X25519";
      for (const name of ["generateKey", "importKey", "deriveBits"]) {
        const original = subtle[name].bind(subtle);
        subtle[name] = (...args) => {
          const algorithm = name === "generateKey" ? args[0] : name === "importKey" ? args[2] : args[0];
          return unsupported(algorithm) ? Promise.reject(new DOMException("Algorithm: Unrecognized name", "NotSupportedError")) : original(...args);
        };
      }
    })()`;
    const other = await openConsole(browser, server.url, "", withoutX25519);
    try {
      await other.page.locator('nav a[data-route="identity"]').click();
      const shown = other.page.getByTestId("encryption-key");
      expect(await shown.getAttribute("data-available")).toBe("false");
      expect(await shown.textContent()).toContain("confidential tasks are shown sealed");
      await other.page.locator('nav a[data-route="new"]').click();
      expect(await other.page.getByTestId("confidential").isDisabled()).toBe(true);
      expect(await other.page.getByTestId("confidential-note").textContent()).toContain("no X25519 in WebCrypto");
      // Plain tasks go on as before.
      await other.page.getByTestId("task-type").selectOption("text_analysis");
      await other.page.getByTestId("task-payload").fill(JSON.stringify({ text: "Plain as ever." }));
      await other.page.getByTestId("submit-task").click();
      const status = other.page.locator('[data-testid="submit-status"][data-task-id]');
      await status.waitFor({ state: "attached", timeout: TIMEOUT });
      expect(await status.textContent()).not.toContain("(confidential)");
      await other.page.locator('[data-testid="state-graph"][data-current="completed"]').waitFor({ timeout: TIMEOUT });
      expect(await other.page.getByTestId("log-verdict").getAttribute("data-all-verified")).toBe("true");
      expect(other.errors).toEqual([]);
    } finally {
      await other.context.close();
    }
  });

  it("met no script error, failed load or CSP violation", () => {
    expect(session.errors).toEqual([]);
  });
});
