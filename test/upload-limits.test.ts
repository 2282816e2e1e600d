// Upload limits that fresh keys cannot multiply, through a real server on a
// socket: fifty made-up senders uploading at once stay under the total of
// all senders (HTTP 507, typed), uploads stop at the data dir's free-space
// reserve (read through a stubbed statfs, not by filling a disk), at most
// so many uploads arrive at once from all senders, and a sender known only
// by first use has a smaller quota than one the trust store binds.
import { afterEach, describe, expect, it } from "vitest";
import { issueToken } from "../src/crypto/tokens.js";
import { generateKey, selfCertifyingAgentId, type AgentKey } from "../src/crypto/keys.js";
import { PinnedKeys, TrustChain, TrustStore } from "../src/envelope/trust-sources.js";
import { memoryStorage } from "../src/store/memory/index.js";
import { sqliteStorage } from "../src/store/sqlite/index.js";
import type { Storage } from "../src/store/storage.js";
import { runCli, startServe } from "./helpers/cli.js";
import { startTestServer, tempDir, type TestServer } from "./helpers/server.js";

const KB = 1024;

interface Sender {
  agentId: string;
  key: AgentKey;
}

/** A made-up sender: a fresh key and the id derived from it, as anyone can make. */
function mintSender(): Sender {
  const key = generateKey();
  return { agentId: selfCertifyingAgentId(key.publicKey), key };
}

/** POST /upload of `bytes` as `sender`: the HTTP status and the JSON answer. */
async function upload(server: Pick<TestServer, "url"> & { agent: { identity: { agentId: string } } }, sender: Sender, bytes: Uint8Array): Promise<{ status: number; code?: string; detail?: Record<string, unknown> }> {
  const token = await issueToken(sender.key, { agentId: sender.agentId, audience: server.agent.identity.agentId });
  const form = new FormData();
  form.append("file", new Blob([bytes]), "data.bin");
  const response = await fetch(`${server.url}/upload`, { method: "POST", body: form, headers: { Authorization: `Bearer ${token}` } });
  const body = (await response.json()) as { code?: string; details?: Array<{ debug?: Record<string, unknown> }> };
  // An error's JSON carries the ErrorDetail decoded as `debug`.
  return { status: response.status, code: body.code, detail: body.details?.[0]?.debug };
}

const bytesOf = (size: number, seed: number) => new Uint8Array(size).fill(seed % 251);

let server: TestServer | undefined;
let storage: Storage | undefined;
afterEach(async () => {
  await server?.close();
  await storage?.close();
  server = undefined;
  storage = undefined;
});

describe("the total of every sender's uploads", () => {
  for (const kind of ["memory", "sqlite"] as const) {
    it(`holds against 50 made-up keys uploading at once (${kind} store)`, async () => {
      storage = kind === "memory" ? memoryStorage() : sqliteStorage(`${await tempDir("synapse-upload-total-")}/synapse.db`);
      const total = 1000 * KB;
      server = await startTestServer({ storage, uploadLimits: { totalBytes: total, maxConcurrent: 100, firstUseQuotaBytes: 200 * KB } });
      const senders = Array.from({ length: 50 }, mintSender);
      // Each well under its own quota; together five times the total.
      const answers = await Promise.all(senders.map((sender, index) => upload(server!, sender, bytesOf(100 * KB, index))));
      const stored = answers.filter((answer) => answer.status === 200);
      const refused = answers.filter((answer) => answer.status !== 200);
      expect(stored.length).toBeGreaterThan(0);
      expect(stored.length * 100 * KB).toBeLessThanOrEqual(total);
      expect(await storage.uploads.totalUsage()).toBe(stored.length * 100 * KB);
      expect(refused.length).toBe(50 - stored.length);
      for (const answer of refused) {
        expect(answer.status).toBe(507);
        expect(answer).toMatchObject({ code: "resource_exhausted", detail: { protocolCode: "upload_quota_exceeded", details: { rule: "total", total_bytes: total } } });
      }
      // Sequentially the rest fill the total exactly, and not a byte more.
      let more = 0;
      for (const [index, sender] of senders.entries()) {
        if ((await upload(server, sender, bytesOf(100 * KB, 1000 + index))).status === 200) more++;
      }
      expect((stored.length + more) * 100 * KB).toBe(total);
    });
  }

  it("bounds uploads arriving at once from all senders, whoever sends them", async () => {
    server = await startTestServer({ uploadLimits: { maxConcurrent: 2 } });
    // Two uploads whose bodies never finish hold both places.
    const hanging = await Promise.all([mintSender(), mintSender()].map((sender) => openUpload(server!, sender)));
    try {
      const third = await upload(server, mintSender(), bytesOf(10 * KB, 3));
      expect(third.status).toBe(429);
      expect(third.detail).toMatchObject({ protocolCode: "rate_limited", retryAfterSeconds: 5, details: { rule: "uploads_in_progress", max_concurrent: 2 } });
    } finally {
      for (const request of hanging) request.abort();
    }
    await expect.poll(() => server!.agent.uploads.room.inProgress, { timeout: 5000 }).toBe(0);
    expect((await upload(server, mintSender(), bytesOf(10 * KB, 4))).status).toBe(200);
  });
});

/** An upload whose body has begun and stays open: it holds its place until aborted. */
async function openUpload(target: TestServer, sender: Sender): Promise<AbortController> {
  const token = await issueToken(sender.key, { agentId: sender.agentId, audience: target.agent.identity.agentId });
  const controller = new AbortController();
  const boundary = "synapse-test-boundary";
  const body = new ReadableStream<Uint8Array>({
    start(stream) {
      stream.enqueue(new TextEncoder().encode(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.bin"\r\n\r\n${"x".repeat(1000)}`));
    },
  });
  fetch(`${target.url}/upload`, {
    method: "POST",
    body,
    duplex: "half",
    signal: controller.signal,
    headers: { Authorization: `Bearer ${token}`, "Content-Type": `multipart/form-data; boundary=${boundary}` },
  } as RequestInit).catch(() => undefined);
  await expect.poll(() => target.agent.uploads.room.inProgress, { timeout: 5000 }).toBeGreaterThanOrEqual(1);
  return controller;
}

describe("the data dir's free-space reserve", () => {
  it("refuses uploads that would take the filesystem below the reserve (507), and takes them again when space returns", async () => {
    let freeBytes = 1100 * KB;
    const asked: string[] = [];
    const statfs = async (path: string) => {
      asked.push(path);
      return { bavail: freeBytes, bsize: 1 };
    };
    server = await startTestServer({ uploadLimits: { spacePath: "/data/dir", reserveBytes: 1000 * KB, statfs } });
    const sender = mintSender();
    expect((await upload(server, sender, bytesOf(50 * KB, 1))).status).toBe(200);
    // 1100 KiB free less the 50 KiB just taken: another 60 KiB would go below the reserve.
    const refused = await upload(server, sender, bytesOf(60 * KB, 2));
    expect(refused.status).toBe(507);
    expect(refused).toMatchObject({
      code: "resource_exhausted",
      detail: { protocolCode: "upload_quota_exceeded", retryAfterSeconds: 60, details: { rule: "disk_reserve", reserve_bytes: 1000 * KB } },
    });
    expect(asked.every((path) => path === "/data/dir")).toBe(true);
    // Space comes back (the reading is believed for a second): uploads are taken again.
    freeBytes = 10_000 * KB;
    await new Promise((resolve) => setTimeout(resolve, 1100));
    expect((await upload(server, sender, bytesOf(60 * KB, 2))).status).toBe(200);
  });
});

describe("quotas by how a sender is known", () => {
  it("gives a sender known only by first use a smaller quota than one the trust store binds", async () => {
    const bound = { ...mintSender(), agentId: "billing-service" };
    storage = memoryStorage();
    const trust = new TrustChain([new TrustStore([{ agentId: bound.agentId, publicKey: bound.key.publicKey }]), new PinnedKeys(storage.pins)]);
    server = await startTestServer({ storage, trust, uploadLimits: { quotaBytes: 400 * KB, firstUseQuotaBytes: 100 * KB } });
    const stranger = mintSender();
    const refused = await upload(server, stranger, bytesOf(150 * KB, 1));
    expect(refused.status).toBe(429);
    expect(refused.detail).toMatchObject({ protocolCode: "upload_quota_exceeded", details: { rule: "sender_quota", quota_bytes: 100 * KB, trust: "first_use" } });
    expect((await upload(server, stranger, bytesOf(90 * KB, 2))).status).toBe(200);
    // The bound sender takes what the stranger could not, up to its own, larger quota.
    expect((await upload(server, bound, bytesOf(150 * KB, 1))).status).toBe(200);
    expect((await upload(server, bound, bytesOf(200 * KB, 3))).status).toBe(200);
    const over = await upload(server, bound, bytesOf(100 * KB, 4));
    expect(over.detail).toMatchObject({ details: { rule: "sender_quota", quota_bytes: 400 * KB, trust: "bound" } });
  });
});

describe("synapse serve's upload and registry flags", () => {
  it("bounds every sender's uploads by --upload-total, a stranger's by --upload-quota-first-use (a real serve process)", async () => {
    const serve = await startServe(["--data-dir", await tempDir(), "--store", "memory", "--upload-total", String(300 * KB), "--upload-quota-first-use", String(200 * KB)]);
    try {
      const target = { url: serve.url, agent: { identity: { agentId: serve.agentId } } };
      const first = mintSender();
      expect((await upload(target, first, bytesOf(150 * KB, 1))).status).toBe(200);
      expect((await upload(target, first, bytesOf(100 * KB, 2))).detail).toMatchObject({ details: { rule: "sender_quota", quota_bytes: 200 * KB, trust: "first_use" } });
      expect((await upload(target, mintSender(), bytesOf(100 * KB, 3))).status).toBe(200);
      const third = await upload(target, mintSender(), bytesOf(100 * KB, 4));
      expect(third).toMatchObject({ status: 507, detail: { details: { rule: "total", total_bytes: 300 * KB } } });
    } finally {
      await serve.stop();
    }
  });

  it("refuses a limit that is not a number, and registry limits without --registry (exit 2); --help names them all", async () => {
    const notNumber = await runCli(["serve", "--port", "0", "--data-dir", await tempDir(), "--upload-total", "1GiB"]);
    expect(notNumber.code).toBe(2);
    expect(notNumber.stderr).toContain("--upload-total must be a non-negative integer");
    const noRegistry = await runCli(["serve", "--port", "0", "--data-dir", await tempDir(), "--registry-rate", "5"]);
    expect(noRegistry.code).toBe(2);
    expect(noRegistry.stderr).toContain("--registry-rate goes with --registry");
    const help = await runCli(["serve", "--help"]);
    for (const flag of ["--upload-quota-first-use", "--upload-total", "--upload-reserve", "--max-uploads", "--registry-max-untrusted", "--registry-rate"]) expect(help.stdout).toContain(flag);
  });
});
