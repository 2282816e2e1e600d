// Encryption keys on disk and their rotation: a retired key still opens what
// was sealed to it until its overlap ends, then it is refused and deleted;
// the published bindings say which key to seal to.
import { create } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ConfidentialitySchema } from "../gen/synapse/v1/confidential_pb.js";
import { ErrorDetailSchema } from "../gen/synapse/v1/errors_pb.js";
import { loadOrCreateEncryptionKeys, saveEncryptionKeys } from "../src/crypto/encryption-keys.js";
import { generateKey } from "../src/crypto/keys.js";
import { newTaskKey, taskKeyIdOf, unwrapTaskKey, wrapTaskKey } from "../src/envelope/confidential.js";
import { currentEncryptionKey, signEncryptionKey } from "../src/envelope/encryption-binding.js";
import { tempDir } from "./helpers/server.js";

const DAY = 24 * 3600 * 1000;
const sender = { agentId: "agent_requester", keyId: "requester-key" };

function codeOf(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    return ConnectError.from(error).findDetails(ErrorDetailSchema)[0]?.protocolCode ?? String(error);
  }
  return "opened";
}

describe("encryption keys", () => {
  it("keep a retired key for its overlap, then refuse what was sealed to it and delete it", async () => {
    const dir = await tempDir("synapse-enc-keys-");
    const now = Date.now();
    const first = await loadOrCreateEncryptionKeys(dir, now);
    expect((await loadOrCreateEncryptionKeys(dir, now)).current.keyId).toBe(first.current.keyId); // made once, then loaded

    const taskKey = newTaskKey();
    const wrapped = wrapTaskKey(taskKey, { taskId: "t1", sender, recipient: { agentId: "agent_x", keyId: first.current.keyId } }, first.current.publicKey);
    const confidential = create(ConfidentialitySchema, { taskKeyId: taskKeyIdOf(taskKey), keys: [wrapped] });

    const rotated = first.rotated(now, 7 * DAY);
    await saveEncryptionKeys(dir, rotated);
    const reloaded = await loadOrCreateEncryptionKeys(dir, now + DAY);
    expect(reloaded.current.keyId).toBe(rotated.current.keyId);
    expect(reloaded.current.keyId).not.toBe(first.current.keyId);
    expect(reloaded.retired.map((key) => key.keyId)).toEqual([first.current.keyId]);
    // Within the overlap the old key opens the task key; after it, the key is unknown.
    expect(Buffer.from(unwrapTaskKey(confidential, "t1", sender, "agent_x", reloaded, now + DAY)).equals(Buffer.from(taskKey))).toBe(true);
    expect(codeOf(() => unwrapTaskKey(confidential, "t1", sender, "agent_x", reloaded, now + 8 * DAY))).toBe("encryption_key_unknown");

    const later = await loadOrCreateEncryptionKeys(dir, now + 8 * DAY);
    expect(later.retired).toEqual([]);
    expect(await readdir(join(dir, "encryption-retired"))).toEqual([]);
  });

  it("publish the current key and the retired one, and a sender seals to the current", async () => {
    const identity = generateKey();
    const now = Date.now();
    const ring = (await loadOrCreateEncryptionKeys(await tempDir("synapse-enc-pub-"), now - 1000)).rotated(now, DAY);
    const published = ring.published(now).map((key) => signEncryptionKey("agent_x", identity, key));
    expect(published).toHaveLength(2);
    expect(currentEncryptionKey(published, "agent_x", identity.publicKey)?.keyId).toBe(ring.current.keyId);
    // Bindings signed by another identity key are not this agent's.
    expect(currentEncryptionKey(published, "agent_x", generateKey().publicKey)).toBeUndefined();
  });
});
