import { calculateJwkThumbprint } from "jose";
import { randomBytes } from "node:crypto";
import { readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { defaultEd25519, ed25519Implementations, nodeEd25519, sodiumEd25519 } from "../src/crypto/ed25519.js";
import { generateKey, keyFromPem, keyIdOf, loadKey, loadOrCreateKey, publicJwk, saveKey } from "../src/crypto/keys.js";
import { tempDir } from "./helpers/server.js";

describe("Ed25519 implementations", () => {
  it("make identical signatures and accept each other's", () => {
    expect(ed25519Implementations.map((ed) => ed.name)).toEqual([...(sodiumEd25519 ? ["libsodium"] : []), "node:crypto", "tweetnacl"]);
    for (let i = 0; i < 50; i++) {
      const key = generateKey();
      const message = new Uint8Array(randomBytes(i * 37));
      const signatures = ed25519Implementations.map((ed) => ed.sign(message, key.seed));
      for (const signature of signatures) expect(Buffer.from(signature).equals(Buffer.from(signatures[0]!))).toBe(true);
      for (const ed of ed25519Implementations) {
        expect(ed.verify(message, signatures[0]!, key.publicKey)).toBe(true);
        expect(Buffer.from(ed.publicKeyFromSeed(key.seed)).equals(Buffer.from(key.publicKey))).toBe(true);
      }
    }
  });

  it("return false, never throw, for malformed keys and signatures", () => {
    const key = generateKey();
    const message = new Uint8Array([1, 2, 3]);
    const signature = nodeEd25519.sign(message, key.seed);
    const tampered = new Uint8Array(signature);
    tampered[10]! ^= 1;
    for (const ed of ed25519Implementations) {
      expect(ed.verify(message, signature.subarray(0, 63), key.publicKey)).toBe(false);
      expect(ed.verify(message, signature, key.publicKey.subarray(0, 31))).toBe(false);
      expect(ed.verify(message, new Uint8Array(64), new Uint8Array(32).fill(0xff))).toBe(false);
      expect(ed.verify(message, tampered, key.publicKey)).toBe(false);
      expect(ed.verify(new Uint8Array([1, 2, 4]), signature, key.publicKey)).toBe(false);
      expect(() => ed.sign(message, key.seed.subarray(0, 31))).toThrow(RangeError);
    }
  });

  it("sign and verify with libsodium by default where its addon loads (SYNAPSE_ED25519=node rules it out)", () => {
    if (process.env.SYNAPSE_ED25519 === "node") {
      console.log("SYNAPSE_ED25519=node: libsodium ruled out, node:crypto is the default");
      expect(defaultEd25519).toBe(nodeEd25519);
      return;
    }
    // sodium-native ships a prebuilt addon for this platform (linux, macOS, Windows on x64 and arm64).
    expect(sodiumEd25519?.name).toBe("libsodium");
    expect(defaultEd25519).toBe(sodiumEd25519);
  });
});

describe("agent keys", () => {
  it("derive the key id as the RFC 7638 JWK thumbprint", async () => {
    const key = generateKey();
    expect(key.keyId).toBe(await calculateJwkThumbprint(publicJwk(key.publicKey), "sha256"));
    expect(keyIdOf(key.publicKey)).toBe(key.keyId);
  });

  it("save with mode 0600 as PKCS#8 PEM and load back the same key", async () => {
    const dir = await tempDir();
    const path = join(dir, "nested", "agent.key");
    const key = generateKey();
    await saveKey(path, key);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    const pem = await readFile(path, "utf8");
    expect(pem).toMatch(/^-----BEGIN PRIVATE KEY-----\n/);
    const loaded = await loadKey(path);
    expect(loaded.keyId).toBe(key.keyId);
    expect(Buffer.from(loaded.seed).equals(Buffer.from(key.seed))).toBe(true);
  });

  it("create a key once and keep it", async () => {
    const path = join(await tempDir(), "agent.key");
    const first = await loadOrCreateKey(path);
    const second = await loadOrCreateKey(path);
    expect(first.created).toBe(true);
    expect(second.created).toBe(false);
    expect(second.key.keyId).toBe(first.key.keyId);
  });

  it("refuse a PEM that is not an Ed25519 key", async () => {
    const path = join(await tempDir(), "bad.key");
    await writeFile(path, "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n");
    await expect(loadKey(path)).rejects.toThrow();
    expect(() => keyFromPem("garbage")).toThrow();
  });
});
