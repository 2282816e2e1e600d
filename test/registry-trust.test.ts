// RegistryTrust, the agent's view of a remote registry's key directory,
// against a real registry server: what it keeps is bounded however many
// made-up sender ids it is asked about, concurrent lookups of one id make
// one call to the registry, and a registered agent's key is found by key id.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { joinRegistry } from "../src/registry/join.js";
import { RegistryTrust } from "../src/registry/registry-trust.js";
import { silentLogger } from "../src/log.js";
import { scrape, total } from "./helpers/metrics.js";
import { startTestServer, type TestServer } from "./helpers/server.js";

const GET_AGENT = "synapse.v1.RegistryService/GetAgent";

let registry: TestServer;
let member: TestServer;
beforeAll(async () => {
  registry = await startTestServer({ agentId: "registry_trust", registry: { leaseMs: 30_000 } });
  member = await startTestServer();
  await joinRegistry({ registryUrl: registry.url, identity: member.agent.identity, provider: member.agent.provider, endpointUrl: member.url, logger: silentLogger });
});
afterAll(async () => {
  await member.close();
  await registry.close();
});

const lookups = async () => total(await scrape(registry.url), "synapse_rpc_requests_total", { procedure: GET_AGENT });

/** The count once it reaches `atLeast` (a call is counted as its response closes, just after the client has it). */
async function lookupsReaching(atLeast: number): Promise<number> {
  for (let i = 0; i < 100; i++) {
    const count = await lookups();
    if (count >= atLeast) return count;
    await new Promise((done) => setTimeout(done, 20));
  }
  return lookups();
}

describe("RegistryTrust", () => {
  it("holds at most maxEntries answers however many unknown ids it is asked about", async () => {
    const trust = new RegistryTrust(registry.url, 60_000, 50);
    for (let i = 0; i < 200; i++) expect(await trust.check(`agent_made_up_${i}`, "some-key")).toEqual({ kind: "unknown" });
    expect(trust.size).toBe(50);
    // The newest answers are the ones kept: asking again about them costs the registry nothing.
    const before = await lookupsReaching(200);
    for (let i = 150; i < 200; i++) await trust.check(`agent_made_up_${i}`, "some-key");
    // One id it has not asked about: that one call, and only it, is counted.
    await trust.check("agent_made_up_new", "some-key");
    expect(await lookupsReaching(before + 1)).toBe(before + 1);
  });

  it("asks the registry once for concurrent lookups of one id", async () => {
    const trust = new RegistryTrust(registry.url, 60_000);
    const before = await lookups(); // the test above left every call counted
    const verdicts = await Promise.all(Array.from({ length: 20 }, () => trust.check("agent_asked_at_once", "some-key")));
    expect(verdicts.every((verdict) => verdict.kind === "unknown")).toBe(true);
    expect(await lookupsReaching(before + 1)).toBe(before + 1);
  });

  it("trusts a registered agent's key, finds it by key id, and reports another key as a conflict", async () => {
    const trust = new RegistryTrust(registry.url, 60_000, 2);
    const { agentId, key } = member.agent.identity;
    expect(await trust.check(agentId, key.keyId)).toEqual({ kind: "trusted" });
    expect(Buffer.from(trust.publicKeyFor(key.keyId)!).equals(Buffer.from(key.publicKey))).toBe(true);
    expect(await trust.check(agentId, "another-key")).toEqual({ kind: "conflict", expectedKeyId: key.keyId });
    // Pushed out by newer answers, its key is no longer known by key id.
    await trust.check("agent_made_up_a", "k");
    await trust.check("agent_made_up_b", "k");
    expect(trust.publicKeyFor(key.keyId)).toBeUndefined();
  });
});
