// List replies never exceed the server's message limit: a page that would is
// read again with fewer items, and its next-page token goes on from there.
// Without it, ListAuditEvents over a long audit trail answered
// RESOURCE_EXHAUSTED, untyped, to a request that asked for nothing wrong
// (found by the fuzz suite).
import { createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CapabilityStatus, RegistryService } from "../gen/synapse/v1/registry_pb.js";
import type { AgentIdentity } from "../src/agent/identity.js";
import { issueToken } from "../src/crypto/tokens.js";
import { governedCapability } from "./helpers/capabilities.js";
import { requesterIdentity, startTestServer, type TestServer } from "./helpers/server.js";

const MAX_FILE_SIZE = 4096; // the message limit is this plus 64 KiB
const CHANGES = 30;

let registry: TestServer;
let admin: AgentIdentity;
let capabilityId: string;
beforeAll(async () => {
  admin = await requesterIdentity();
  registry = await startTestServer({ agentId: "registry_pages", maxFileSize: MAX_FILE_SIZE, registry: { admins: [admin.key.keyId] } });
  const rpc = createClient(RegistryService, createGrpcTransport({ baseUrl: registry.url }));
  const as = { headers: { Authorization: `Bearer ${await issueToken(admin.key, { agentId: admin.agentId, audience: "registry_pages" })}` } };
  const capability = governedCapability({ code: "long_history", name: "A capability with a long history", owner: "finance" });
  capabilityId = (await rpc.registerCapability({ capability }, as)).capability!.id;
  // Each change is audited with its reason: 30 reasons of 3,500 characters, past the 68 KiB limit together.
  for (let i = 0; i < CHANGES; i++) {
    const status = i % 2 === 0 ? CapabilityStatus.DEPRECATED : CapabilityStatus.ACTIVE;
    await rpc.setCapabilityStatus({ id: capabilityId, status, reason: `change ${i}: `.padEnd(3500, "r") }, as);
  }
});
afterAll(async () => {
  await registry.close();
});

async function allPages(rpc: Client<typeof RegistryService>): Promise<{ ids: string[]; pages: number }> {
  const ids: string[] = [];
  let pageToken = "";
  let pages = 0;
  do {
    const page = await rpc.listAuditEvents({ capabilityId, pageSize: 1000, pageToken });
    expect(page.events.length).toBeGreaterThan(0);
    ids.push(...page.events.map((event) => event.id));
    pageToken = page.nextPageToken;
    pages++;
  } while (pageToken !== "" && pages < 100);
  return { ids, pages };
}

describe("list pages", () => {
  for (const [name, transport] of [
    ["gRPC", () => createGrpcTransport({ baseUrl: registry.url })],
    ["Connect JSON", () => createConnectTransport({ baseUrl: registry.url, httpVersion: "1.1" })],
  ] as const) {
    it(`fit the message limit over ${name}, and paging through them finds every audit event once`, async () => {
      const { ids, pages } = await allPages(createClient(RegistryService, transport()));
      expect(pages).toBeGreaterThan(1);
      expect(new Set(ids).size).toBe(ids.length);
      expect(ids.length).toBeGreaterThanOrEqual(CHANGES + 1);
    });
  }
});
