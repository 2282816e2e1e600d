// An agent that trusts a registry (`synapse serve --trust-registry`) and has
// just refused a squatter's message for an id nobody had registered accepts
// the id's owner as soon as the owner registers, not once the cached "not
// registered" expires; and senders it keeps refusing make a bounded number
// of lookups at the registry. A real registry, agent and owner process.
import { ConnectError } from "@connectrpc/connect";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadOrCreateIdentity } from "../src/agent/identity.js";
import { SynapseClient } from "../src/client/requester.js";
import { findErrorDetail } from "../src/protocol/errors.js";
import { startServe, type ServeProcess } from "./helpers/cli.js";
import { scrape, total } from "./helpers/metrics.js";
import { requesterIdentity, tempDir } from "./helpers/server.js";

const OWNER_ID = "invoice_bot";
const GET_AGENT = "synapse.v1.RegistryService/GetAgent";

let registry: ServeProcess;
let agent: ServeProcess;
let ownerDir: string;
beforeAll(async () => {
  // The owner's key, bound to its name in the registry's trust store: only that key may register the name.
  ownerDir = await tempDir();
  const owner = (await loadOrCreateIdentity(ownerDir, { agentId: OWNER_ID })).identity;
  const trustStore = join(await tempDir(), "trust.json");
  await writeFile(trustStore, JSON.stringify({ agents: [{ agent_id: OWNER_ID, public_key: Buffer.from(owner.key.publicKey).toString("base64url") }] }));
  registry = await startServe(["--data-dir", await tempDir(), "--registry", "--trust-store", trustStore, "--tofu", "--log-level", "warn"]);
  agent = await startServe(["--data-dir", await tempDir(), "--trust-registry", registry.url, "--log-level", "warn"]);
});
afterAll(async () => {
  expect(await agent.stop()).toBe(0);
  expect(await registry.stop()).toBe(0);
});

/** The protocol code a submit as this sender is refused with, or "accepted". */
async function submitAs(identity: Awaited<ReturnType<typeof requesterIdentity>>): Promise<string> {
  const client = await SynapseClient.connect({ baseUrl: agent.url, identity });
  try {
    await client.submit("text_analysis", { text: "Pay it. Now." });
    return "accepted";
  } catch (error) {
    return findErrorDetail(ConnectError.from(error))?.protocolCode ?? String(error);
  }
}

const lookups = async () => total(await scrape(registry.url), "synapse_rpc_requests_total", { procedure: GET_AGENT });

describe("--trust-registry after a refused squatter", () => {
  it("accepts the owner as soon as it has registered", async () => {
    const squatter = await requesterIdentity(OWNER_ID);
    expect(await submitAs(squatter)).toBe("unknown_sender");

    // The owner registers (a real `synapse serve --join`), then writes to the agent at once.
    const owner = await startServe(["--data-dir", ownerDir, "--join", registry.url, "--log-level", "warn"]);
    try {
      for (let i = 0; i < 200 && !owner.stdout().includes("joined registry"); i++) await new Promise((done) => setTimeout(done, 25));
      expect(owner.stdout()).toContain("joined registry");
      const ownerIdentity = (await loadOrCreateIdentity(ownerDir)).identity;
      const registeredAt = Date.now();
      expect(await submitAs(ownerIdentity)).toBe("accepted");
      // Well inside the 10 s a "not registered" is kept for.
      expect(Date.now() - registeredAt).toBeLessThan(5000);
      // The squatter is still refused: the registry holds another key for the name.
      expect(await submitAs(squatter)).toBe("unknown_sender");
    } finally {
      expect(await owner.stop()).toBe(0);
    }
  }, 60_000);

  it("asks the registry again at a bounded rate however often refused senders write", async () => {
    const senders = await Promise.all(Array.from({ length: 4 }, (_, i) => requesterIdentity(`squatter_${i}`)));
    const clients = await Promise.all(senders.map((identity) => SynapseClient.connect({ baseUrl: agent.url, identity })));
    const before = await lookups();
    const started = Date.now();
    let refused = 0;
    await Promise.all(
      clients.map(async (client) => {
        for (let i = 0; i < 40; i++) {
          const code = await client.submit("text_analysis", { text: "Again." }).then(
            () => "accepted",
            (error: unknown) => findErrorDetail(ConnectError.from(error))?.protocolCode,
          );
          if (code === "unknown_sender") refused++;
        }
      }),
    );
    const seconds = (Date.now() - started) / 1000;
    // A call is counted as its response closes: let the last ones land.
    await new Promise((done) => setTimeout(done, 200));
    const asked = (await lookups()) - before;
    expect(refused).toBe(160);
    // One first lookup per sender, then at most 20 rechecks a second (and 20 at once) across all of them.
    expect(asked).toBeGreaterThanOrEqual(4);
    expect(asked).toBeLessThanOrEqual(4 + 20 + Math.ceil(20 * seconds));
  }, 60_000);
});
