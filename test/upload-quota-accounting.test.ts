// What a sender's upload quota counts (docs/PROTOCOL.md §5.11): its
// finished uploads, each file once; a refusal's used_bytes is what the
// uploads would hold with what had arrived of the refused one, which is
// then not kept; and a
// file sent again needs room for its size while it streams, though it is
// kept, and counted, once.
import { ConnectError } from "@connectrpc/connect";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SynapseClient } from "../src/client/requester.js";
import { uploadFile } from "../src/client/upload.js";
import { findErrorDetail } from "../src/protocol/errors.js";
import { memoryStorage } from "../src/store/memory/index.js";
import { connectClient, startTestServer, tempDir, type TestServer } from "./helpers/server.js";

const KB = 1024;
const QUOTA = 100 * KB;
let server: TestServer;
let client: SynapseClient;
const storage = memoryStorage();

beforeAll(async () => {
  server = await startTestServer({ storage, uploadLimits: { maxUploadBytes: 80 * KB, quotaBytes: QUOTA } });
  client = await connectClient(server);
});
afterAll(async () => {
  await server?.close();
});

async function upload(bytes: Uint8Array, as: SynapseClient = client) {
  const path = join(await tempDir("synapse-quota-file-"), "data.bin");
  await writeFile(path, bytes);
  return uploadFile({ baseUrl: server.url, token: await as.token(), path }).catch((error: unknown) => ConnectError.from(error));
}

const used = () => storage.uploads.usage(client.agentId);
const refusedWith = (result: unknown) => findErrorDetail(result)?.details as { used_bytes?: number; quota_bytes?: number } | undefined;

describe("upload quota accounting", () => {
  it("counts finished uploads once each, and never the refused one", async () => {
    const first = new Uint8Array(60 * KB).fill(1);
    expect(await upload(first)).toMatchObject({ size: 60 * KB });
    expect(await used()).toBe(60 * KB);

    // 60 + 50 > 100: refused, used_bytes is what the uploads would have held with it.
    const refused = await upload(new Uint8Array(50 * KB).fill(2));
    expect(findErrorDetail(refused)?.protocolCode).toBe("upload_quota_exceeded");
    // used_bytes: the finished uploads plus what had arrived of this one when it was refused (over the quota, at most all of it).
    const { used_bytes: wouldHold, quota_bytes: quota } = refusedWith(refused) ?? {};
    expect(quota).toBe(QUOTA);
    expect(wouldHold).toBeGreaterThan(QUOTA);
    expect(wouldHold).toBeLessThanOrEqual(110 * KB);
    // The refused upload left nothing behind: 40 KiB still fit.
    expect(await used()).toBe(60 * KB);
    expect(await upload(new Uint8Array(40 * KB).fill(3))).toMatchObject({ size: 40 * KB });
    expect(await used()).toBe(100 * KB);

    // The quota is full: the next upload is refused before a byte is read, used_bytes without it.
    const full = await upload(new Uint8Array(1).fill(4));
    expect(refusedWith(full)).toMatchObject({ rule: "sender_quota", used_bytes: 100 * KB, quota_bytes: QUOTA });
  });

  it("needs room for a file sent again while it streams, and keeps it once", async () => {
    const other = await connectClient(server);
    const mine = (bytes: Uint8Array) => upload(bytes, other);
    const usage = () => storage.uploads.usage(other.agentId);
    const big = new Uint8Array(60 * KB).fill(5);
    expect(await mine(big)).toMatchObject({ size: 60 * KB });
    // The same 60 KiB again: the host knows it is the same file only at its last byte, so it needs room (60 + 60 > 100).
    expect(findErrorDetail(await mine(big))?.protocolCode).toBe("upload_quota_exceeded");
    expect(await usage()).toBe(60 * KB);
    const small = new Uint8Array(20 * KB).fill(6);
    expect(await mine(small)).toMatchObject({ size: 20 * KB });
    // 80 + 20 fits: accepted, and kept (and counted) once.
    expect(await mine(small)).toMatchObject({ size: 20 * KB });
    expect(await usage()).toBe(80 * KB);
  });
});
