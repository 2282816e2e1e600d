// Bearer tokens hold exactly PROTOCOL.md §5.4: 60 s of tolerance on exp and
// iat (59 s in, 61 s out, on both sides), a lifetime after iat and at most
// 300 s; at the unit and through a real server's GetTask.
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { SignJWT } from "jose";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { P2PService } from "../gen/synapse/v1/p2p_pb.js";
import { privateKeyObject } from "../src/crypto/ed25519.js";
import { generateKey, publicJwk, type AgentKey } from "../src/crypto/keys.js";
import { verifyToken } from "../src/crypto/tokens.js";
import type { TrustPolicy } from "../src/envelope/trust.js";
import { PinnedKeys } from "../src/envelope/trust-sources.js";
import { findErrorDetail } from "../src/protocol/errors.js";
import { connectClient, requesterIdentity, startTestServer, type TestServer } from "./helpers/server.js";

function signToken(key: AgentKey, agentId: string, audience: string, iat: number, exp: number): Promise<string> {
  return new SignJWT({})
    .setProtectedHeader({ alg: "EdDSA", typ: "JWT", kid: key.keyId, jwk: publicJwk(key.publicKey) })
    .setIssuer(agentId)
    .setSubject(agentId)
    .setAudience(audience)
    .setIssuedAt(iat)
    .setExpirationTime(exp)
    .sign(privateKeyObject(key.seed));
}

/** [name, iat, exp] relative to now (seconds), and whether the token is accepted. */
const cases: Array<[string, number, number, boolean]> = [
  ["exp 59 s ago", -359, -59, true],
  ["exp 61 s ago", -361, -61, false],
  ["iat 59 s ahead", 59, 359, true],
  ["iat 61 s ahead", 61, 361, false],
  ["iat a year ahead, 300 s lifetime", 365 * 86_400, 365 * 86_400 + 300, false],
  ["negative lifetime", 0, -10, false],
  ["zero lifetime", 0, 0, false],
  ["lifetime of 300 s", -1, 299, true],
  ["lifetime of 301 s", -1, 300, false],
  ["lifetime of an hour", 0, 3600, false],
];

describe("verifyToken", () => {
  const key = generateKey();
  const nowMs = 1_767_225_600_000; // 2026-01-01T00:00:00Z: a whole second, so the cases are exact
  const now = nowMs / 1000;
  for (const [name, iat, exp, accepted] of cases) {
    it(`${accepted ? "accepts" : "refuses"} a token with ${name}`, async () => {
      const token = await signToken(key, "alice", "bob", now + iat, now + exp);
      const verdict = verifyToken(token, { audience: "bob", trust: PinnedKeys.inMemory({ firstUse: "any" }), nowMs });
      if (accepted) await expect(verdict).resolves.toEqual({ agentId: "alice", keyId: key.keyId, firstUse: true });
      else await expect(verdict).rejects.toMatchObject({ code: Code.Unauthenticated });
    });
  }

  it("holds the tolerance at 60 s at both edges", async () => {
    // These cases are about time; any name is trusted here.
    const trust = PinnedKeys.inMemory({ firstUse: "any" });
    const at = (iat: number, exp: number) => signToken(key, "alice", "bob", now + iat, now + exp).then((token) => verifyToken(token, { audience: "bob", trust, nowMs }));
    await expect(at(-300, 0)).resolves.toBeDefined();
    await expect(at(-360, -60)).rejects.toThrow(/expired/);
    await expect(at(60, 360)).resolves.toBeDefined();
    await expect(at(61, 361)).rejects.toThrow(/iat is in the future/);
  });
});

describe("bearer tokens through GetTask", () => {
  let server: TestServer;
  let taskId: string;
  let owner: { agentId: string; key: AgentKey };
  beforeAll(async () => {
    server = await startTestServer({ agentId: "executor_tokens" });
    const identity = await requesterIdentity();
    const client = await connectClient(server, { identity });
    taskId = (await client.submit("text_analysis", { text: "Hi." })).taskId;
    owner = { agentId: identity.agentId, key: identity.key };
  });
  afterAll(() => server.close());

  for (const [name, iat, exp, accepted] of cases) {
    it(`${accepted ? "serves" : "refuses"} a token with ${name}`, async () => {
      // JWT times are whole seconds: round now the way that keeps the case on
      // its side of the edge while the server checks it a few milliseconds later
      // (up: a later exp, a later iat; down: an earlier exp).
      const nowMs = Date.now();
      const base = accepted || iat > 0 ? Math.ceil(nowMs / 1000) : Math.floor(nowMs / 1000);
      const token = await signToken(owner.key, owner.agentId, "executor_tokens", base + iat, base + exp);
      const client = createClient(P2PService, createGrpcTransport({ baseUrl: server.url }));
      const answer = client.getTask({ taskId }, { headers: { authorization: `Bearer ${token}` } });
      if (accepted) {
        expect((await answer).task?.taskId).toBe(taskId);
      } else {
        const error = await answer.then(() => undefined, (e: unknown) => ConnectError.from(e));
        expect(error?.code).toBe(Code.Unauthenticated);
        expect(findErrorDetail(error)?.protocolCode).toBe("unauthenticated");
      }
    });
  }
});

// A token verified once is not verified again while it lives; what may change
// between two uses is checked every time.
describe("verifyToken, the same token again", () => {
  const key = generateKey();
  afterEach(() => vi.useRealTimers());
  const fresh = () => signToken(key, "carol", "dave", Math.floor(Date.now() / 1000), Math.floor(Date.now() / 1000) + 300);

  it("is accepted again, but never for another audience", async () => {
    const token = await fresh();
    const trust = PinnedKeys.inMemory({ firstUse: "any" });
    await expect(verifyToken(token, { audience: "dave", trust })).resolves.toEqual({ agentId: "carol", keyId: key.keyId, firstUse: true });
    await expect(verifyToken(token, { audience: "dave", trust })).resolves.toEqual({ agentId: "carol", keyId: key.keyId, firstUse: true });
    await expect(verifyToken(token, { audience: "erin", trust })).rejects.toThrow(/claim aud/);
  });

  it("runs the trust check every time", async () => {
    const token = await fresh();
    let trusted = true;
    const trust: TrustPolicy = {
      publicKeyFor: () => key.publicKey,
      check: () => (trusted ? { kind: "trusted" } : { kind: "conflict", expectedKeyId: "another" }),
    };
    // A policy that binds the key (a trust store, a registry) is not first use.
    await expect(verifyToken(token, { audience: "dave", trust })).resolves.toMatchObject({ firstUse: false });
    trusted = false;
    await expect(verifyToken(token, { audience: "dave", trust })).rejects.toThrow(/not trusted/);
  });

  it("is refused once it has expired, though it verified before", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const token = await fresh();
    const trust = PinnedKeys.inMemory({ firstUse: "any" });
    await expect(verifyToken(token, { audience: "dave", trust })).resolves.toBeDefined();
    vi.setSystemTime(Date.now() + 359_000);
    await expect(verifyToken(token, { audience: "dave", trust })).resolves.toBeDefined();
    vi.setSystemTime(Date.now() + 2_000);
    await expect(verifyToken(token, { audience: "dave", trust })).rejects.toThrow(/expired/);
  });
});
