// The catalogue's authorization rules as pure logic (no server): lineage
// ownership, keys, admins, an agent's registrations under another key,
// records without an owner, and what a refusal commits.
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { RiskLevel } from "../gen/synapse/v1/capabilities_pb.js";
import { AuditEventKind, CapabilityStatus, CapabilityType, GovernedCapabilitySchema, OntologySchema } from "../gen/synapse/v1/registry_pb.js";
import { findErrorDetail } from "../src/protocol/errors.js";
import { CatalogueAccess } from "../src/registry/catalogue-access.js";
import { CapabilityCatalogue, REGISTRY_ACTOR } from "../src/registry/catalogue.js";
import { MemoryCatalogueStorage } from "../src/store/memory/registry.js";

const key = (letter: string) => letter.repeat(43);
const ADMIN = { agentId: "ops", keyId: key("A") };
const ALICE = { agentId: "alice", keyId: key("B") };
const ALICE_OTHER_KEY = { agentId: "alice", keyId: key("C") };
const BOB = { agentId: "bob", keyId: key("D") };

function cap(init: MessageInitShape<typeof GovernedCapabilitySchema> = {}) {
  return create(GovernedCapabilitySchema, {
    code: "summarize",
    name: "Summarize",
    capabilityType: CapabilityType.TASK,
    inputSchema: '{"type":"object"}',
    outputSchema: "{}",
    riskLevel: RiskLevel.LOW,
    owner: "text team",
    version: "1.0.0",
    status: CapabilityStatus.ACTIVE,
    ...init,
  });
}

async function denied(attempt: Promise<unknown>): Promise<string | undefined> {
  const error = ConnectError.from(await attempt.then(() => new Error("expected a refusal"), (e: unknown) => e));
  expect(error.code).toBe(Code.PermissionDenied);
  return findErrorDetail(error)?.details?.rule as string | undefined;
}

function catalogue() {
  const storage = new MemoryCatalogueStorage();
  return { storage, cat: new CapabilityCatalogue({ storage, admins: [ADMIN.keyId] }) };
}

describe("catalogue authorization", () => {
  it("names admins by key id only", () => {
    expect(() => new CatalogueAccess(["alice"])).toThrow(/key id/);
    expect(new CatalogueAccess([key("A")]).isAdmin(ADMIN)).toBe(true);
    expect(new CatalogueAccess([key("A")]).isAdmin({ agentId: "ops", keyId: key("Z") })).toBe(false);
  });

  it("a refusal commits its REFUSED event and nothing else", async () => {
    const { storage, cat } = catalogue();
    const mine = await cat.register(cap({ agentId: "alice" }), ALICE);
    const before = [...storage.capabilities()].map((record) => [record.id, record.status, record.version]);
    expect(await denied(cat.register(cap({ agentId: "alice", version: "2.0.0" }), ALICE_OTHER_KEY))).toBe("not_owner");
    expect([...storage.capabilities()].map((record) => [record.id, record.status, record.version])).toEqual(before);
    const trail = (await cat.listAudit()).events;
    expect(trail.map((event) => event.kind)).toEqual([AuditEventKind.REGISTERED, AuditEventKind.REFUSED]);
    expect(trail[1]).toMatchObject({ actor: "alice", actorKeyId: ALICE_OTHER_KEY.keyId, action: "RegisterCapability", capabilityCode: "summarize", from: "", to: "2.0.0" });
    expect(mine.ownerKeyId).toBe(ALICE.keyId);
  });

  it("an agent's registration under another key leaves the other key's lineages alone, audited", async () => {
    const { cat } = catalogue();
    const [first] = await cat.syncAgent("alice", [cap(), cap({ code: "translate" })], ALICE);
    // Same id, another key (the old entry was dropped and someone registered the id again).
    const listed = await cat.syncAgent("alice", [cap(), cap({ code: "fresh" })], ALICE_OTHER_KEY);
    expect(listed).toEqual(["cap_alice_fresh_1_0_0"]);
    expect((await cat.get(first!))?.ownerKeyId).toBe(ALICE.keyId);
    // Its unlisted capabilities are not the newcomer's to take offline.
    expect((await cat.get("cap_alice_translate_1_0_0"))?.status).toBe(CapabilityStatus.ACTIVE);
    const refused = (await cat.listAudit()).events.filter((event) => event.kind === AuditEventKind.REFUSED);
    expect(refused).toHaveLength(1);
    expect(refused[0]).toMatchObject({ action: "Register", capabilityId: first, actorKeyId: ALICE_OTHER_KEY.keyId });
    // Retiring (deregister, or the lease sweep) under a key touches only that key's.
    expect(await cat.retireAgent("alice", "deregistered", ALICE_OTHER_KEY, ALICE_OTHER_KEY.keyId)).toEqual(["cap_alice_fresh_1_0_0"]);
    expect(await cat.retireAgent("alice", "lease expired", REGISTRY_ACTOR, ALICE.keyId)).toEqual([first, "cap_alice_translate_1_0_0"]);
  });

  it("an admin may list a capability for an agent; that agent then owns it, recognised by the key the registry trusts", async () => {
    const { cat } = catalogue();
    const listed = await cat.register(cap({ agentId: "alice" }), ADMIN);
    expect(listed).toMatchObject({ ownerAgentId: "alice", ownerKeyId: "" });
    await cat.setStatus(listed.id, CapabilityStatus.DEPRECATED, "", ALICE_OTHER_KEY);
    expect(await denied(cat.setStatus(listed.id, CapabilityStatus.OFFLINE, "", BOB))).toBe("not_owner");
    expect(await denied(cat.register(cap({ agentId: "alice", version: "2.0.0" }), BOB))).toBe("not_the_agent");
  });

  it("records without an owner (seeded in-process) are the admins'", async () => {
    const { cat } = catalogue();
    const seeded = await cat.register(cap({ code: "static_rule", capabilityType: CapabilityType.RULE }), "seed");
    expect(seeded).toMatchObject({ ownerAgentId: "", ownerKeyId: "" });
    expect(await denied(cat.setStatus(seeded.id, CapabilityStatus.OFFLINE, "", ALICE))).toBe("admin_only");
    expect(await denied(cat.register(cap({ code: "static_rule", capabilityType: CapabilityType.RULE, version: "2.0.0" }), ALICE))).toBe("admin_only");
    expect((await cat.setStatus(seeded.id, CapabilityStatus.OFFLINE, "", ADMIN)).status).toBe(CapabilityStatus.OFFLINE);
  });

  it("grants: admins only, and matching counts what they grant", async () => {
    const { cat } = catalogue();
    await cat.register(cap({ code: "guarded", capabilityType: CapabilityType.RULE, permissionRequired: ["p:read"] }), ADMIN);
    expect(await denied(cat.setGrant(ALICE.keyId, ["p:read"], "", ALICE))).toBe("admin_only");
    expect(await cat.permissionsOf(ALICE)).toEqual([]);
    await cat.setGrant(ALICE.keyId, ["p:read"], "reader", ADMIN);
    expect(await cat.permissionsOf(ALICE)).toEqual(["p:read"]);
    expect(await cat.permissionsOf(ALICE_OTHER_KEY)).toEqual([]);
    expect(await cat.permissionsOf(undefined)).toEqual([]);
    const ontology = create(OntologySchema, { nextStep: "run_rule" });
    expect((await cat.match(ontology, await cat.permissionsOf(ALICE))).map((m) => m.capability?.code)).toEqual(["guarded"]);
    // Unchanged permissions: no new audit event.
    await cat.setGrant(ALICE.keyId, ["p:read"], "again", ADMIN);
    expect((await cat.listAudit()).events.filter((event) => event.kind === AuditEventKind.GRANT_CHANGED)).toHaveLength(1);
  });
});
