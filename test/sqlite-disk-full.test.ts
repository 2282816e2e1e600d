// A SQLite data dir whose disk fills up, for real: `synapse serve` on a
// small tmpfs (needs root, or the right to mount one; otherwise the test
// says in one line why it did not run). Task writes that do not fit are
// refused with UNAVAILABLE (agent_not_ready, a retry-after, reason
// disk_full), never INTERNAL; the process stays up; the database passes
// integrity_check; and once space returns every acknowledged task
// completes and new ones are taken again.
import Database from "better-sqlite3";
import { Code, ConnectError } from "@connectrpc/connect";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeSync, openSync, closeSync, unlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MessageType } from "../gen/synapse/v1/envelope_pb.js";
import { ErrorCode } from "../gen/synapse/v1/errors_pb.js";
import { TaskState } from "../gen/synapse/v1/payloads_pb.js";
import { SynapseClient } from "../src/client/requester.js";
import { findErrorDetail } from "../src/protocol/errors.js";
import { SQLITE_FILE } from "../src/store/open.js";
import { startServe, type ServeProcess } from "./helpers/cli.js";
import { requesterIdentity } from "./helpers/server.js";

const DISK_BYTES = 8 * 1024 * 1024;

/** Mounts a tmpfs of `bytes` at a new directory; undefined (and why) when this process may not. */
function mountSmallDisk(bytes: number): { dir: string } | { why: string } {
  if (process.getuid?.() !== 0) return { why: "not root" };
  const dir = mkdtempSync(join(tmpdir(), "synapse-small-disk-"));
  const mounted = spawnSync("mount", ["-t", "tmpfs", "-o", `size=${bytes}`, "tmpfs", dir], { encoding: "utf8" });
  if (mounted.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    return { why: `mount -t tmpfs failed: ${(mounted.stderr || mounted.error?.message || "").trim()}` };
  }
  return { dir };
}

const disk = mountSmallDisk(DISK_BYTES);
if ("why" in disk) process.stdout.write(`\n  SQLite disk-full test did not run: it mounts a small tmpfs, and here ${disk.why}\n\n`);

/** Fills the filesystem at `dir` until a write fails with ENOSPC; returns the file that holds it. */
function fill(dir: string): string {
  const path = join(dir, "filler");
  const fd = openSync(path, "w");
  const block = Buffer.alloc(64 * 1024, 1);
  try {
    for (;;) writeSync(fd, block);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOSPC") throw error;
    // And the last few bytes a smaller write still fits in.
    for (let size = 32 * 1024; size >= 512; size /= 2) {
      try {
        for (;;) writeSync(fd, block.subarray(0, size));
      } catch {
        // next size down
      }
    }
  } finally {
    closeSync(fd);
  }
  return path;
}

function integrity(path: string): string {
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    return String(db.pragma("integrity_check", { simple: true }));
  } finally {
    db.close();
  }
}

describe.skipIf("why" in disk)("a SQLite data dir whose disk fills up", () => {
  const root = "dir" in disk ? disk.dir : "";
  const dataDir = join(root, "data");
  let server: ServeProcess;
  let client: SynapseClient;
  let identity: Awaited<ReturnType<typeof requesterIdentity>>;
  const acknowledged: string[] = [];

  beforeAll(async () => {
    mkdirSync(dataDir);
    server = await startServe(["--data-dir", dataDir, "--log-level", "warn"]);
    identity = await requesterIdentity();
    client = await SynapseClient.connect({ baseUrl: server.url, identity, transport: { protocol: "grpc" } });
  }, 30_000);

  afterAll(async () => {
    if (server?.child.exitCode === null) await server.stop("SIGTERM");
    execFileSync("umount", [root]);
    rmSync(root, { recursive: true, force: true });
  }, 30_000);

  /** Sends large tasks into the full disk until a few are refused; returns the refusals. */
  async function sendIntoFullDisk(): Promise<ConnectError[]> {
    // Payloads large enough that the WAL must grow.
    const text = "Words to count. ".repeat(4096);
    const refusals: ConnectError[] = [];
    for (let i = 0; i < 200 && refusals.length < 5; i++) {
      try {
        const sent = await client.submit("text_analysis", { text });
        if (sent.reply?.type === MessageType.TASK_CONFIRM) acknowledged.push(sent.taskId);
      } catch (error) {
        refusals.push(ConnectError.from(error));
      }
    }
    console.log(`[disk full] ${JSON.stringify({ acknowledgedWhileFull: acknowledged.length, refusals: refusals.length })}`);
    expect(refusals.length).toBeGreaterThan(0);
    for (const refusal of refusals) {
      expect(refusal.code).toBe(Code.Unavailable);
      const detail = findErrorDetail(refusal);
      expect(detail?.code).toBe(ErrorCode.AGENT_NOT_READY);
      expect(detail?.retryAfterSeconds).toBeGreaterThan(0);
      expect(detail?.details?.reason).toBe("disk_full");
    }
    expect(server.child.exitCode).toBeNull();
    return refusals;
  }

  it("refuses what does not fit with a typed UNAVAILABLE, stays up and uncorrupted, and serves again once space returns", async () => {
    // Some tasks first, so the database has something to lose.
    const before: string[] = [];
    for (let i = 0; i < 20; i++) {
      const sent = await client.submit("text_analysis", { text: `Before the disk filled, task ${i}.` }, { waitMs: 10_000 });
      expect(sent.task?.state).toBe(TaskState.COMPLETED);
      before.push(sent.taskId);
    }
    let filler = fill(root);
    await sendIntoFullDisk();

    // Space returns: the same process serves again, and what it acknowledged while full completes.
    unlinkSync(filler);
    const after = await client.submit("text_analysis", { text: "After the disk was freed." }, { waitMs: 10_000 });
    expect(after.task?.state).toBe(TaskState.COMPLETED);
    for (const taskId of acknowledged) expect((await client.waitFor(taskId)).state).toBe(TaskState.COMPLETED);

    // Full again, and stopped while full: the database it leaves passes integrity_check (read once
    // there is room again: a reader of a WAL database needs room for its shared-memory file).
    filler = fill(root);
    await sendIntoFullDisk();
    expect(await server.stop("SIGTERM")).toBe(0);
    unlinkSync(filler);
    expect(integrity(join(dataDir, SQLITE_FILE))).toBe("ok");

    // Started again: everything acknowledged is there and completed.
    server = await startServe(["--data-dir", dataDir, "--log-level", "warn"]);
    client = await SynapseClient.connect({ baseUrl: server.url, identity, transport: { protocol: "grpc" } });
    for (const taskId of [...before, after.taskId, ...acknowledged]) expect((await client.waitFor(taskId)).state).toBe(TaskState.COMPLETED);
    expect(await server.stop("SIGTERM")).toBe(0);
    expect(integrity(join(dataDir, SQLITE_FILE))).toBe("ok");
  }, 90_000);
});
