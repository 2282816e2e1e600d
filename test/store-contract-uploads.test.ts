// The UploadStore contract, against every implementation (memory, SQLite,
// PostgreSQL): bytes read back exactly from any offset across chunk edges,
// one record per (owner, hash), the quota checked in the finishing commit,
// nothing visible before commit or after abort, durability across a
// reopen, and pruning that spares uploads a live task uses.
import { createHash, randomBytes } from "node:crypto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { TaskState } from "../gen/synapse/v1/payloads_pb.js";
import type { Storage } from "../src/store/storage.js";
import { readUploadChunks, UPLOAD_CHUNK_BYTES, UploadQuotaError, type UploadStore } from "../src/store/uploads.js";
import { newTask, signedEvent, storeKinds } from "./store-contract/fixtures.js";

const sha = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

async function readAll(store: UploadStore, record: Parameters<typeof readUploadChunks>[1]): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  for await (const part of readUploadChunks(store, record)) parts.push(part);
  return Buffer.concat(parts);
}

/** Uploads `bytes` in uneven pieces, as a network would deliver them. */
async function upload(store: UploadStore, owner: string, bytes: Uint8Array, nowMs = 1_000, quotaBytes?: number) {
  const writer = await store.beginUpload(owner, nowMs);
  for (let offset = 0; offset < bytes.byteLength; offset += 70_001) await writer.write(bytes.subarray(offset, offset + 70_001));
  return writer.commit({ sha256: sha(bytes), size: bytes.byteLength, contentType: "text/csv", fileName: "data.csv", quotaBytes });
}

for (const kind of storeKinds()) {
  describe.skipIf(!kind.available())(`${kind.name} upload store`, () => {
    let storage: Storage;
    let store: UploadStore;
    beforeEach(async () => {
      storage = await kind.open();
      store = storage.uploads;
    });
    afterEach(async () => {
      await storage.close();
    });

    it("keeps the exact bytes, in chunks, readable from any offset", async () => {
      const bytes = randomBytes(UPLOAD_CHUNK_BYTES * 2 + 12_345);
      const record = await upload(store, "alice", bytes);
      expect(record).toMatchObject({ owner: "alice", sha256: sha(bytes), size: bytes.byteLength, contentType: "text/csv", fileName: "data.csv" });
      expect(await store.getUpload("alice", sha(bytes))).toMatchObject({ size: bytes.byteLength });
      // Another owner's upload of the same bytes is theirs alone.
      expect(await store.getUpload("bob", sha(bytes))).toBeUndefined();
      const whole = await readAll(store, record);
      expect(whole.equals(bytes)).toBe(true);
      const across = await store.readUpload("alice", sha(bytes), UPLOAD_CHUNK_BYTES - 10, 20);
      expect(Buffer.from(across).equals(bytes.subarray(UPLOAD_CHUNK_BYTES - 10, UPLOAD_CHUNK_BYTES + 10))).toBe(true);
      expect(await store.readUpload("alice", sha(bytes), bytes.byteLength, 10)).toHaveLength(0);
      await expect(store.readUpload("alice", "0".repeat(64), 0, 10)).rejects.toBeInstanceOf(RangeError);
      expect(await store.usage("alice")).toBe(bytes.byteLength);
      expect(await store.usage("bob")).toBe(0);
    });

    it("keeps one record per owner and hash; an empty file is an upload too", async () => {
      const bytes = randomBytes(1000);
      await upload(store, "alice", bytes, 1_000);
      const again = await upload(store, "alice", bytes, 5_000);
      expect(again).toMatchObject({ createdAtMs: 1_000, lastUsedAtMs: 5_000 });
      expect(await store.usage("alice")).toBe(1000);
      const empty = await upload(store, "alice", new Uint8Array(0));
      expect(empty.size).toBe(0);
      expect(await readAll(store, empty)).toHaveLength(0);
    });

    it("refuses, in the finishing commit, an upload beyond the owner's quota, and keeps nothing of it", async () => {
      await upload(store, "alice", randomBytes(600), 1_000, 1_000);
      const refused = await upload(store, "alice", randomBytes(500), 1_000, 1_000).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(UploadQuotaError);
      expect(refused).toMatchObject({ usedBytes: 1_100, quotaBytes: 1_000 });
      expect(await store.usage("alice")).toBe(600);
      // Another owner has a quota of its own.
      await upload(store, "bob", randomBytes(900), 1_000, 1_000);
    });

    it("refuses, in the finishing commit, an upload beyond the total of every owner's, also when many owners finish at once", async () => {
      const finish = async (owner: string, bytes: Uint8Array) => {
        const writer = await store.beginUpload(owner, 1_000);
        await writer.write(bytes);
        return writer;
      };
      // 50 owners, each well under its own quota, written first and then finished together.
      const writers = await Promise.all(Array.from({ length: 50 }, (_, index) => finish(`owner-${index}`, randomBytes(1_000))));
      const outcomes = await Promise.allSettled(
        writers.map((writer, index) => writer.commit({ sha256: `${index}`.padStart(64, "0"), size: 1_000, contentType: "", fileName: "", quotaBytes: 5_000, totalBytes: 10_500 })),
      );
      const kept = outcomes.filter((outcome) => outcome.status === "fulfilled");
      expect(kept).toHaveLength(10);
      for (const outcome of outcomes) {
        if (outcome.status === "rejected") expect(outcome.reason).toMatchObject({ name: "UploadQuotaError", scope: "total", quotaBytes: 10_500 });
      }
      expect(await store.totalUsage()).toBe(10_000);
      // The refused uploads kept nothing: what is left under the total is still there to take, and no more.
      const fits = randomBytes(500);
      const writer = await finish("late", fits);
      expect(await writer.commit({ sha256: sha(fits), size: 500, contentType: "", fileName: "", totalBytes: 10_500 })).toMatchObject({ size: 500 });
      await expect(upload(store, "later", randomBytes(1), 1_000)).resolves.toMatchObject({ size: 1 }); // no total named: none checked
      const over = await finish("latest", randomBytes(1));
      await expect(over.commit({ sha256: "f".repeat(64), size: 1, contentType: "", fileName: "", totalBytes: 10_501 })).rejects.toMatchObject({ scope: "total", usedBytes: 10_502 });
      expect(await store.totalUsage()).toBe(10_501);
    });

    it("shows nothing before commit or after abort", async () => {
      const bytes = randomBytes(UPLOAD_CHUNK_BYTES + 1);
      const writer = await store.beginUpload("alice", 1_000);
      await writer.write(bytes);
      expect(await store.getUpload("alice", sha(bytes))).toBeUndefined();
      await writer.abort();
      expect(await store.getUpload("alice", sha(bytes))).toBeUndefined();
      expect(await store.usage("alice")).toBe(0);
    });

    it("prunes uploads unused since a time unless a live task uses them, and abandoned ones", async () => {
      const kept = randomBytes(100);
      const used = randomBytes(200);
      const old = randomBytes(300);
      await upload(store, "alice", kept, 9_000);
      await upload(store, "alice", used, 1_000);
      await upload(store, "alice", old, 1_000);
      await storage.tasks.createTask(newTask("t1"), signedEvent("t1", 1));
      expect(await store.useUpload("alice", sha(used), "t1", 1_500)).toBe(true);
      expect(await store.useUpload("alice", "f".repeat(64), "t1", 1_500)).toBe(false);
      const abandoned = await store.beginUpload("alice", 1_000);
      await abandoned.write(randomBytes(10));
      expect(await store.pruneUploads(5_000, 100)).toBe(2); // `old` and the abandoned one
      expect(await store.getUpload("alice", sha(old))).toBeUndefined();
      expect(await store.getUpload("alice", sha(used))).toBeDefined();
      expect(await store.getUpload("alice", sha(kept))).toBeDefined();
      await expect(abandoned.commit({ sha256: "a".repeat(64), size: 10, contentType: "", fileName: "" })).rejects.toThrow();
      // Once its task is over, the used upload goes too.
      await storage.tasks.commit("t1", 1, { state: TaskState.COMPLETED }, signedEvent("t1", 2));
      expect(await store.pruneUploads(5_000, 100)).toBe(1);
      expect(await store.usage("alice")).toBe(100);
    });

    // Only durable stores can be reopened; the memory store has no such case.
    if (kind.reopen !== undefined) it("keeps uploads across a reopen", async () => {
      const bytes = randomBytes(UPLOAD_CHUNK_BYTES + 7);
      await upload(store, "alice", bytes);
      await storage.close();
      storage = await kind.reopen!();
      store = storage.uploads;
      const record = await store.getUpload("alice", sha(bytes));
      expect(record?.size).toBe(bytes.byteLength);
      expect((await readAll(store, record!)).equals(bytes)).toBe(true);
    });
  });
}
