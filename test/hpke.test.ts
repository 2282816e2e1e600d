// HPKE as composed in src/crypto/hpke.ts: the RFC 9180 vector's keys and
// encapsulation (Go's copy of the RFC's vectors), and @hpke/core opening
// what we seal and the other way round.
import { Aes128Gcm, CipherSuite, DhkemX25519HkdfSha256, HkdfSha256 } from "@hpke/core";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { deriveX25519, generateX25519, hpkeOpen, hpkeSeal, x25519 } from "../src/crypto/hpke.js";

const hex = (text: string) => Buffer.from(text, "hex");
// RFC 9180 Appendix A.1 (DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM), base mode.
const A1 = {
  info: "4f6465206f6e2061204772656369616e2055726e",
  ikmE: "7268600d403fce431561aef583ee1613527cff655c1343f29812e66706df3234",
  ikmR: "6db9df30aa07dd42ee5e8181afdb977e538f5e1fec8a06223f33f7013e525037",
  skRm: "4612c550263fc8ad58375df3f557aac531d26850903e55a9f23f21d8534e8ac8",
  pkRm: "3948cfe0ad1ddb695d780e59077195da6c56506b027329794ab02bca80815c4d",
  enc: "37fda3567bdbd628e88668c3c8d7e97d1d1253b6d4ea6d44c150f741f1bf4431",
  // The first encryption of A.1.1: sequence 0, so the single-shot nonce.
  aad0: "436f756e742d30",
  pt: "4265617574792069732074727574682c20747275746820626561757479",
  ct0: "f938558b5d72f1a23810b4be2ab4f84331acc02fc97babc53a52ae8218a355a96d8770ac83d07bea87e13c512a",
};

const suite = new CipherSuite({ kem: new DhkemX25519HkdfSha256(), kdf: new HkdfSha256(), aead: new Aes128Gcm() });

describe("HPKE base mode, X25519 / HKDF-SHA256 / AES-128-GCM", () => {
  it("derives the RFC 9180 A.1 keys and reproduces its first ciphertext", () => {
    const recipient = deriveX25519(hex(A1.ikmR));
    expect(Buffer.from(recipient).toString("hex")).toBe(A1.skRm);
    expect(Buffer.from(x25519.publicKeyOf(recipient)).toString("hex")).toBe(A1.pkRm);
    const sealed = hpkeSeal(hex(A1.pkRm), hex(A1.info), hex(A1.aad0), hex(A1.pt), deriveX25519(hex(A1.ikmE)));
    expect(sealed.enc.toString("hex")).toBe(A1.enc);
    expect(sealed.ciphertext.toString("hex")).toBe(A1.ct0);
    expect(hpkeOpen(recipient, hex(A1.pkRm), sealed.enc, hex(A1.info), hex(A1.aad0), sealed.ciphertext)?.toString("hex")).toBe(A1.pt);
  });

  it("seals what @hpke/core opens, and opens what it seals", async () => {
    const recipient = generateX25519();
    const recipientPublic = x25519.publicKeyOf(recipient);
    const info = Buffer.from("synapse test info");
    const ours = hpkeSeal(recipientPublic, info, Buffer.from("aad"), Buffer.from("to them"));
    const key = await suite.kem.deserializePrivateKey(recipient);
    const opened = await suite.open({ recipientKey: key, enc: ours.enc, info }, ours.ciphertext, Buffer.from("aad"));
    expect(Buffer.from(opened).toString()).toBe("to them");

    const publicKey = await suite.kem.deserializePublicKey(recipientPublic);
    const theirs = await suite.seal({ recipientPublicKey: publicKey, info }, Buffer.from("to us"), Buffer.from("aad"));
    expect(hpkeOpen(recipient, recipientPublic, new Uint8Array(theirs.enc), info, Buffer.from("aad"), new Uint8Array(theirs.ct))?.toString()).toBe("to us");
  });

  it("refuses a changed info, aad, enc or ciphertext, and a low-order enc", () => {
    const recipient = generateX25519();
    const pub = x25519.publicKeyOf(recipient);
    const sealed = hpkeSeal(pub, Buffer.from("i"), Buffer.from("a"), Buffer.from("secret"));
    expect(hpkeOpen(recipient, pub, sealed.enc, Buffer.from("i"), Buffer.from("a"), sealed.ciphertext)?.toString()).toBe("secret");
    expect(hpkeOpen(recipient, pub, sealed.enc, Buffer.from("j"), Buffer.from("a"), sealed.ciphertext)).toBeUndefined();
    expect(hpkeOpen(recipient, pub, sealed.enc, Buffer.from("i"), Buffer.from("b"), sealed.ciphertext)).toBeUndefined();
    const enc = Buffer.from(sealed.enc);
    enc[0]! ^= 1;
    expect(hpkeOpen(recipient, pub, enc, Buffer.from("i"), Buffer.from("a"), sealed.ciphertext)).toBeUndefined();
    const ct = Buffer.from(sealed.ciphertext);
    ct[0]! ^= 1;
    expect(hpkeOpen(recipient, pub, sealed.enc, Buffer.from("i"), Buffer.from("a"), ct)).toBeUndefined();
    expect(hpkeOpen(recipient, pub, Buffer.alloc(32), Buffer.from("i"), Buffer.from("a"), sealed.ciphertext)).toBeUndefined();
    expect(hpkeOpen(recipient, pub, Buffer.alloc(31), Buffer.from("i"), Buffer.from("a"), sealed.ciphertext)).toBeUndefined();
  });

  it("computes the same X25519 as node:crypto (libsodium's where its addon loads)", async () => {
    const { createPrivateKey, createPublicKey, diffieHellman } = await import("node:crypto");
    const a = generateX25519();
    const b = generateX25519();
    const der = (raw: Uint8Array) => createPrivateKey({ key: Buffer.concat([Buffer.from("302e020100300506032b656e04220420", "hex"), raw]), format: "der", type: "pkcs8" });
    const nodePublic = (raw: Uint8Array) => createPublicKey(der(raw)).export({ format: "der", type: "spki" }).subarray(12);
    expect(Buffer.from(x25519.publicKeyOf(a)).equals(nodePublic(a))).toBe(true);
    const shared = diffieHellman({ privateKey: der(a), publicKey: createPublicKey(der(b)) });
    expect(Buffer.from(x25519.shared(a, x25519.publicKeyOf(b))!).equals(shared)).toBe(true);
  });
});
