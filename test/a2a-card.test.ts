// The A2A agent card at /.well-known/agent-card.json, through a real
// socket: what it declares (bindings, capabilities, skills with their
// schemas, bearer security) and its JWS signature, checked with jose
// against the key its jku serves and with @a2a-js/sdk's own verifier.
import { canonicalizeAgentCard, verifyAgentCardSignature, type AgentCard } from "@a2a-js/sdk";
import { DefaultAgentCardResolver } from "@a2a-js/sdk/client";
import { base64url, decodeProtectedHeader, flattenedVerify, importJWK, type CryptoKey, type JWK } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REFERENCE_TASK_TYPES } from "../src/agent/reference/task-types.js";
import { startTestServer, type TestServer } from "./helpers/server.js";

let server: TestServer;
let json: Record<string, unknown>;

beforeAll(async () => {
  server = await startTestServer({ agentId: "executor_card", a2a: {} });
  const response = await fetch(`${server.url}/.well-known/agent-card.json`);
  expect(response.status).toBe(200);
  expect(response.headers.get("content-type")).toMatch(/application\/json/);
  json = (await response.json()) as Record<string, unknown>;
});
afterAll(() => server?.close());

async function publicKeyFrom(jku: string, kid: string) {
  const jwks = (await (await fetch(jku)).json()) as { keys: Array<JWK & { kid: string }> };
  const jwk = jwks.keys.find((key) => key.kid === kid);
  if (jwk === undefined) throw new Error(`no key ${kid} at ${jku}`);
  return importJWK(jwk, "EdDSA");
}

describe("the A2A agent card", () => {
  it("declares every binding served, what works, and the bearer scheme", () => {
    const host = new URL(server.url).host;
    expect(json.supportedInterfaces).toEqual([
      { url: `${server.url}/a2a/jsonrpc`, protocolBinding: "JSONRPC", protocolVersion: "1.0" },
      { url: `${server.url}/a2a/rest`, protocolBinding: "HTTP+JSON", protocolVersion: "1.0" },
      { url: host, protocolBinding: "GRPC", protocolVersion: "1.0" },
    ]);
    expect(json.capabilities).toMatchObject({ streaming: true, pushNotifications: true, extendedAgentCard: false });
    expect(json.securitySchemes).toMatchObject({ bearer: { httpAuthSecurityScheme: { scheme: "Bearer", bearerFormat: "JWT" } } });
    expect(json.securityRequirements).toEqual([{ schemes: { bearer: {} } }]);
  });

  it("has a skill per task type, whose schemas are in the task-schemas extension", () => {
    const skills = json.skills as Array<{ id: string; tags: string[] }>;
    expect(skills.map((skill) => skill.id).sort()).toEqual(REFERENCE_TASK_TYPES.map((taskType) => taskType.type).sort());
    const extension = (json.capabilities as { extensions: Array<{ uri: string; params: { skills: Record<string, { inputSchema: unknown }> } }> }).extensions[0]!;
    expect(extension.uri).toBe("urn:synapse:a2a:task-schemas:v1");
    const textAnalysis = REFERENCE_TASK_TYPES.find((taskType) => taskType.type === "text_analysis")!;
    expect(extension.params.skills.text_analysis!.inputSchema).toEqual(JSON.parse(textAnalysis.inputSchema));
  });

  it("is signed with the agent's Ed25519 key: EdDSA JWS over the canonical card, verified with jose", async () => {
    const signatures = json.signatures as Array<{ protected: string; signature: string }>;
    expect(signatures).toHaveLength(1);
    const header = decodeProtectedHeader({ protected: signatures[0]!.protected } as never);
    expect(header).toMatchObject({ alg: "EdDSA", typ: "JOSE", kid: server.agent.identity.key.keyId, jku: `${server.url}/.well-known/jwks.json` });
    // The card as served (the SDK canonicalizes JSON; a card its resolver already parsed loses its security schemes on the way).
    const card = json as unknown as AgentCard;
    const payload = base64url.encode(canonicalizeAgentCard(card));
    const key = await publicKeyFrom(header.jku!, header.kid!);
    await expect(flattenedVerify({ ...signatures[0]!, payload }, key)).resolves.toBeDefined();
    // A card changed after signing does not verify.
    const forged = base64url.encode(canonicalizeAgentCard({ ...card, name: "someone else" }));
    await expect(flattenedVerify({ ...signatures[0]!, payload: forged }, key)).rejects.toThrow();
  });

  it("verifies with @a2a-js/sdk's card signature verifier", async () => {
    const card = json as unknown as AgentCard;
    // The client reads the same card from the well-known path.
    expect((await new DefaultAgentCardResolver().resolve(server.url)).name).toBe(card.name);
    const verify = verifyAgentCardSignature(async (kid, jku) => (await publicKeyFrom(jku!, kid)) as CryptoKey);
    await expect(verify(card)).resolves.toBeUndefined();
    await expect(verify({ ...card, description: "tampered" })).rejects.toThrow();
  });

  it("is not served when A2A is off", async () => {
    const plain = await startTestServer({ agentId: "executor_plain" });
    try {
      expect((await fetch(`${plain.url}/.well-known/agent-card.json`)).status).toBe(404);
    } finally {
      await plain.close();
    }
  });
});
