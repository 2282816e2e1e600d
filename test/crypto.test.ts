import { calculateJwkThumbprint } from "jose";
import { randomBytes } from "node:crypto";
import { readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { naclEd25519, nodeEd25519 } from "../src/crypto/ed25519.js";
import { generateKey, keyFromPem, keyIdOf, loadKey, loadOrCreateKey, publicJwk, saveKey } from "../src/crypto/keys.js";
import { tempDir } from "./helpers/server.js";

describe("Ed25519 implementations", () => {
  it("make identical signatures and accept each other's", () => {
    for (let i = 0; i < 50; i++) {
      const key = generateKey();
      const message = new Uint8Array(randomBytes(i * 37));
      const fromNode = nodeEd25519.sign(message, key.seed);
      const fromNacl = naclEd25519.sign(message, key.seed);
      expect(Buffer.from(fromNode).equals(Buffer.from(fromNacl))).toBe(true);
      expect(naclEd25519.verify(message, fromNode, key.publicKey)).toBe(true);
      expect(nodeEd25519.verify(message, fromNacl, key.publicKey)).toBe(true);
      expect(Buffer.from(naclEd25519.publicKeyFromSeed(key.seed)).equals(Buffer.from(key.publicKey))).toBe(true);
    }
  });

  it("return false, never throw, for malformed keys and signatures", () => {
    const key = generateKey();
    const message = new Uint8Array([1, 2, 3]);
    const signature = nodeEd25519.sign(message, key.seed);
    for (const ed of [nodeEd25519, naclEd25519]) {
      expect(ed.verify(message, signature.subarray(0, 63), key.publicKey)).toBe(false);
      expect(ed.verify(message, signature, key.publicKey.subarray(0, 31))).toBe(false);
      expect(ed.verify(message, new Uint8Array(64), new Uint8Array(32).fill(0xff))).toBe(false);
    }
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
