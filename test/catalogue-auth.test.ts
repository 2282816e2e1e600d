// Who may change the catalogue, and which permissions matching counts,
// through a real registry server: owners, strangers, a squatter of the
// owner's agent id, admin keys, an agent's synced task types, grants, and
// the audit trail of every refusal.
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AuditEventKind, CapabilityHealth, CapabilityStatus, CapabilityType, RegistryService } from "../gen/synapse/v1/registry_pb.js";
import type { AgentIdentity } from "../src/agent/identity.js";
import { issueToken } from "../src/crypto/tokens.js";
import { TrustStore } from "../src/envelope/trust-sources.js";
import { silentLogger } from "../src/log.js";
import { findErrorDetail } from "../src/protocol/errors.js";
import { joinRegistry, type Membership } from "../src/registry/join.js";
import { governedCapability } from "./helpers/capabilities.js";
import { requesterIdentity, startTestServer, type TestServer } from "./helpers/server.js";

let registry: TestServer;
let agent: TestServer;
let membership: Membership;
let rpc: Client<typeof RegistryService>;
let admin: AgentIdentity;
let owner: AgentIdentity;
let stranger: AgentIdentity;

beforeAll(async () => {
  admin = await requesterIdentity();
  owner = await requesterIdentity();
  stranger = await requesterIdentity();
  agent = await startTestServer({ agentId: "agent_synced" });
  // A named id: the registry's operator binds it to the agent's key.
  const bindings = new TrustStore([{ agentId: "agent_synced", publicKey: agent.agent.identity.key.publicKey }]);
  registry = await startTestServer({ agentId: "registry_auth", registry: { admins: [admin.key.keyId], bindings } });
  rpc = createClient(RegistryService, createGrpcTransport({ baseUrl: registry.url }));
  membership = await joinRegistry({ registryUrl: registry.url, identity: agent.agent.identity, provider: agent.agent.provider, endpointUrl: agent.url, logger: silentLogger });
});
afterAll(async () => {
  await membership.leave();
  await Promise.all([agent.close(), registry.close()]);
});

async function as(identity: AgentIdentity, agentId = identity.agentId) {
  return { headers: { Authorization: `Bearer ${await issueToken(identity.key, { agentId, audience: "registry_auth" })}` } };
}

async function refusal(attempt: Promise<unknown>) {
  const error = ConnectError.from(await attempt.then(() => new Error("expected a refusal"), (e: unknown) => e));
  return { code: error.code, detail: findErrorDetail(error), message: error.rawMessage };
}

async function expectDenied(attempt: Promise<unknown>, rule: string) {
  const { code, detail, message } = await refusal(attempt);
  expect(code).toBe(Code.PermissionDenied);
  expect(detail?.protocolCode).toBe("permission_denied");
  expect(detail?.details).toMatchObject({ rule });
  return message;
}

const statusOf = async (id: string) => (await rpc.getCapability({ id })).capability?.status;

describe("changing a capability", () => {
  it("a stranger cannot change another agent's capability (status, new version, retire); the owner and an admin can", async () => {
    // owner_* in a request are the registry's to set: ignored.
    const mine = governedCapability({ code: "risk_explainer", agentId: owner.agentId, ownerAgentId: stranger.agentId, ownerKeyId: stranger.key.keyId });
    const stored = (await rpc.registerCapability({ capability: mine }, await as(owner))).capability!;
    expect(stored).toMatchObject({ id: `cap_${owner.agentId}_risk_explainer_v1`, ownerAgentId: owner.agentId, ownerKeyId: owner.key.keyId, owner: "财务风控组" });

    const message = await expectDenied(rpc.setCapabilityStatus({ id: stored.id, status: CapabilityStatus.OFFLINE, reason: "mine now" }, await as(stranger)), "not_owner");
    expect(message).toContain(`it belongs to agent ${owner.agentId} (key ${owner.key.keyId})`);
    await expectDenied(rpc.setCapabilityStatus({ id: stored.id, status: CapabilityStatus.DEPRECATED }, await as(stranger)), "not_owner");
    await expectDenied(rpc.registerCapability({ capability: { ...mine, version: "v2" } }, await as(stranger)), "not_the_agent");
    await expectDenied(rpc.registerCapability({ capability: { ...mine, id: stored.id, name: "hijacked" } }, await as(stranger)), "not_the_agent");
    // The stranger's own lineage of the same code is its own, and leaves the owner's alone.
    const theirs = (await rpc.registerCapability({ capability: { ...mine, agentId: stranger.agentId } }, await as(stranger))).capability!;
    expect(theirs.id).toBe(`cap_${stranger.agentId}_risk_explainer_v1`);
    await expectDenied(rpc.registerCapability({ capability: { ...mine, agentId: "", id: stored.id } }, await as(stranger)), "not_owner");
    expect(await statusOf(stored.id)).toBe(CapabilityStatus.ACTIVE);
    expect((await rpc.getCapability({ id: stored.id })).capability?.name).toBe("A capability");

    // The owner registers a new version (superseding v1) and deprecates it; an admin takes it offline.
    const v2 = (await rpc.registerCapability({ capability: { ...mine, version: "v2" } }, await as(owner))).capability!;
    expect(v2).toMatchObject({ ownerAgentId: owner.agentId, ownerKeyId: owner.key.keyId });
    expect(await statusOf(stored.id)).toBe(CapabilityStatus.INACTIVE);
    await rpc.setCapabilityStatus({ id: v2.id, status: CapabilityStatus.DEPRECATED, reason: "v3 coming" }, await as(owner));
    await rpc.setCapabilityStatus({ id: v2.id, status: CapabilityStatus.OFFLINE, reason: "incident" }, await as(admin));
    expect(await statusOf(v2.id)).toBe(CapabilityStatus.OFFLINE);
    // A version an admin adds stays the owner's.
    const v3 = (await rpc.registerCapability({ capability: { ...mine, version: "v3" } }, await as(admin))).capability!;
    expect(v3).toMatchObject({ ownerAgentId: owner.agentId, ownerKeyId: owner.key.keyId });
    await rpc.setCapabilityStatus({ id: v3.id, status: CapabilityStatus.DEPRECATED }, await as(owner));
  });

  it("recognises the owner by its key: a token claiming the owner's agent id with another key changes nothing", async () => {
    const mine = (await rpc.registerCapability({ capability: governedCapability({ code: "key_bound", agentId: owner.agentId }) }, await as(owner))).capability!;
    const squatter = await requesterIdentity(owner.agentId);
    const { code, detail } = await refusal(rpc.setCapabilityStatus({ id: mine.id, status: CapabilityStatus.OFFLINE }, await as(squatter)));
    // Refused for the key (PERMISSION_DENIED), or earlier by a trust policy that knows the id's key (UNAUTHENTICATED).
    if (code === Code.PermissionDenied) expect(detail?.details).toMatchObject({ rule: "not_owner", owner_key_id: owner.key.keyId });
    else expect(code).toBe(Code.Unauthenticated);
    expect(await statusOf(mine.id)).toBe(CapabilityStatus.ACTIVE);
  });

  it("static capabilities (no agent_id) are added by admins only and changed only by admins", async () => {
    const rule = governedCapability({ code: "duplicate_invoice_rule", capabilityType: CapabilityType.RULE });
    await expectDenied(rpc.registerCapability({ capability: rule }, await as(stranger)), "admin_only");
    const stored = (await rpc.registerCapability({ capability: rule }, await as(admin))).capability!;
    expect(stored).toMatchObject({ id: "cap_duplicate_invoice_rule_v1", ownerAgentId: admin.agentId, ownerKeyId: admin.key.keyId });
    await expectDenied(rpc.registerCapability({ capability: { ...rule, version: "v2" } }, await as(stranger)), "not_owner");
    await expectDenied(rpc.setCapabilityStatus({ id: stored.id, status: CapabilityStatus.OFFLINE }, await as(owner)), "not_owner");
    expect(await statusOf(stored.id)).toBe(CapabilityStatus.ACTIVE);
  });

  it("an agent's synced task types belong to that agent: a stranger is refused, the agent and an admin are not", async () => {
    const id = "cap_agent_synced_summarization_1_0_0";
    expect((await rpc.getCapability({ id })).capability).toMatchObject({ agentId: "agent_synced", ownerAgentId: "agent_synced", ownerKeyId: agent.agent.identity.key.keyId });
    await expectDenied(rpc.setCapabilityStatus({ id, status: CapabilityStatus.OFFLINE }, await as(stranger)), "not_owner");
    const takeover = governedCapability({ code: "summarization", agentId: "agent_synced", capabilityType: CapabilityType.TASK, version: "2.0.0" });
    await expectDenied(rpc.registerCapability({ capability: takeover }, await as(stranger)), "not_the_agent");
    await rpc.setCapabilityStatus({ id, status: CapabilityStatus.DEPRECATED, reason: "moving to v2" }, await as(agent.agent.identity));
    await rpc.setCapabilityStatus({ id, status: CapabilityStatus.ACTIVE, reason: "rollback" }, await as(admin));
    expect(await statusOf(id)).toBe(CapabilityStatus.ACTIVE);
  });

  it("answers PERMISSION_DENIED with an ErrorDetail in the Connect protocol too, and needs a token at all", async () => {
    const connect = createClient(RegistryService, createConnectTransport({ baseUrl: registry.url, httpVersion: "1.1" }));
    const id = "cap_duplicate_invoice_rule_v1";
    await expectDenied(connect.setCapabilityStatus({ id, status: CapabilityStatus.OFFLINE }, await as(stranger)), "not_owner");
    expect((await refusal(connect.setCapabilityStatus({ id, status: CapabilityStatus.OFFLINE }))).code).toBe(Code.Unauthenticated);
  });
});

describe("matching counts granted permissions", () => {
  const ontology = { domain: "finance", intent: "approve" };

  it("ignores self-declared permissions, counts grants (the key's and \"*\"), narrows by the request, and gives anonymous callers only what needs none", async () => {
    const adminCall = await as(admin);
    await rpc.registerCapability({ capability: governedCapability({ code: "approve_payment", domain: "finance", intents: ["approve"], permissionRequired: ["payment:approve"] }) }, adminCall);
    await rpc.registerCapability({ capability: governedCapability({ code: "approval_guide", domain: "finance", intents: ["approve"] }) }, adminCall);
    const codes = (response: { candidates: Array<{ capability?: { code: string } }> }) => response.candidates.map((c) => c.capability?.code);

    // Anonymous, and authenticated without a grant: listing a permission adds nothing.
    const anonymous = await rpc.matchCapabilities({ ontology, permissions: ["payment:approve"] });
    expect(codes(anonymous)).toEqual(["approval_guide"]);
    expect(anonymous.permissionsApplied).toEqual([]);
    const ungranted = await rpc.matchCapabilities({ ontology, permissions: ["payment:approve"] }, await as(owner));
    expect(codes(ungranted)).toEqual(["approval_guide"]);
    expect(ungranted.permissionsApplied).toEqual([]);

    // A grant to the key counts; the request's list only narrows it.
    const grant = await rpc.setPermissionGrant({ keyId: owner.key.keyId, permissions: ["payment:approve", "payment:approve", " ledger:read "], reason: "approver" }, adminCall);
    expect(grant.grant).toMatchObject({ keyId: owner.key.keyId, permissions: ["ledger:read", "payment:approve"], updatedBy: admin.agentId, reason: "approver" });
    const granted = await rpc.matchCapabilities({ ontology }, await as(owner));
    expect(codes(granted)).toEqual(["approval_guide", "approve_payment"]);
    expect(granted.permissionsApplied).toEqual(["ledger:read", "payment:approve"]);
    const narrowed = await rpc.matchCapabilities({ ontology, permissions: ["ledger:read", "made:up"] }, await as(owner));
    expect(codes(narrowed)).toEqual(["approval_guide"]);
    expect(narrowed.permissionsApplied).toEqual(["ledger:read"]);
    expect(codes(await rpc.matchCapabilities({ ontology }, await as(stranger)))).toEqual(["approval_guide"]);

    // "*" is every authenticated caller, never an anonymous one.
    await rpc.setPermissionGrant({ keyId: "*", permissions: ["payment:approve"] }, adminCall);
    expect(codes(await rpc.matchCapabilities({ ontology }, await as(stranger)))).toEqual(["approval_guide", "approve_payment"]);
    expect(codes(await rpc.matchCapabilities({ ontology }))).toEqual(["approval_guide"]);

    // Revoked: gone.
    await rpc.setPermissionGrant({ keyId: "*", permissions: [] }, adminCall);
    await rpc.setPermissionGrant({ keyId: owner.key.keyId, permissions: [], reason: "left the team" }, adminCall);
    expect(codes(await rpc.matchCapabilities({ ontology }, await as(owner)))).toEqual(["approval_guide"]);
    expect((await rpc.listPermissionGrants({ keyId: owner.key.keyId })).grants).toEqual([]);

    // A token that is sent must verify.
    const forged = { headers: { Authorization: "Bearer not.a.token" } };
    expect((await refusal(rpc.matchCapabilities({ ontology }, forged))).code).toBe(Code.Unauthenticated);
  });

  it("only admins grant; grants are validated and listed", async () => {
    await expectDenied(rpc.setPermissionGrant({ keyId: stranger.key.keyId, permissions: ["payment:approve"] }, await as(stranger)), "admin_only");
    await expectDenied(rpc.setPermissionGrant({ keyId: "*", permissions: ["payment:approve"] }, await as(owner)), "admin_only");
    expect((await rpc.listPermissionGrants({ keyId: stranger.key.keyId })).grants).toEqual([]);
    const bad = await refusal(rpc.setPermissionGrant({ keyId: "agent_owner", permissions: ["x"] }, await as(admin)));
    expect([bad.code, bad.detail?.details]).toEqual([Code.InvalidArgument, { field: "key_id" }]);
    const spaced = await refusal(rpc.setPermissionGrant({ keyId: stranger.key.keyId, permissions: ["two words"] }, await as(admin)));
    expect(spaced.code).toBe(Code.InvalidArgument);
    await rpc.setPermissionGrant({ keyId: stranger.key.keyId, permissions: ["b:read", "a:read"] }, await as(admin));
    await rpc.setPermissionGrant({ keyId: owner.key.keyId, permissions: ["c:read"] }, await as(admin));
    const first = await rpc.listPermissionGrants({ pageSize: 1 });
    const second = await rpc.listPermissionGrants({ pageSize: 1, pageToken: first.nextPageToken });
    expect([...first.grants, ...second.grants].map((g) => g.keyId)).toEqual([owner.key.keyId, stranger.key.keyId].sort());
    expect(second.nextPageToken).toBe("");
  });
});

describe("the audit trail", () => {
  it("records every refusal (actor, key, capability, what was attempted, why) and every grant change", async () => {
    const events = [];
    let pageToken = "";
    do {
      const page = await rpc.listAuditEvents({ pageToken, pageSize: 1000 });
      events.push(...page.events);
      pageToken = page.nextPageToken;
    } while (pageToken);
    const refused = events.filter((e) => e.kind === AuditEventKind.REFUSED);
    const statusRefusal = refused.find((e) => e.action === "SetCapabilityStatus" && e.capabilityId === `cap_${owner.agentId}_risk_explainer_v1`);
    expect(statusRefusal).toMatchObject({
      actor: stranger.agentId,
      actorKeyId: stranger.key.keyId,
      capabilityCode: "risk_explainer",
      from: "CAPABILITY_STATUS_ACTIVE",
      to: "CAPABILITY_STATUS_OFFLINE",
    });
    expect(statusRefusal?.reason).toContain(`it belongs to agent ${owner.agentId}`);
    expect(refused.find((e) => e.action === "RegisterCapability" && e.capabilityId === "cap_duplicate_invoice_rule_v1" && e.actor === stranger.agentId)).toMatchObject({
      from: "",
      to: "v1",
    });
    expect(refused.find((e) => e.action === "SetPermissionGrant" && e.actor === owner.agentId)).toMatchObject({ granteeKeyId: "*", to: "payment:approve" });
    // Each refusal of this file's stranger is there: 11 attempts above.
    expect(refused.filter((e) => e.actorKeyId === stranger.key.keyId)).toHaveLength(11);

    const grants = events.filter((e) => e.kind === AuditEventKind.GRANT_CHANGED && e.granteeKeyId === owner.key.keyId);
    expect(grants.map((e) => [e.actor, e.from, e.to, e.reason])).toEqual([
      [admin.agentId, "", "ledger:read,payment:approve", "approver"],
      [admin.agentId, "ledger:read,payment:approve", "", "left the team"],
      [admin.agentId, "", "c:read", ""],
    ]);
    // Allowed changes name their actor's key and operation too.
    expect(events.find((e) => e.kind === AuditEventKind.STATUS_CHANGED && e.actor === admin.agentId)).toMatchObject({ actorKeyId: admin.key.keyId, action: "SetCapabilityStatus" });
  });
});

describe("capability health over the wire", () => {
  it("a health number CapabilityHealth does not name is refused at RegisterCapability as at SetCapabilityStatus", async () => {
    const unknownHealth = 9 as CapabilityHealth;
    const registering = await refusal(rpc.registerCapability({ capability: governedCapability({ code: "odd_health", agentId: owner.agentId, health: unknownHealth }) }, await as(owner)));
    expect({ code: registering.code, protocolCode: registering.detail?.protocolCode, details: registering.detail?.details }).toEqual({
      code: Code.InvalidArgument,
      protocolCode: "invalid_params",
      details: { field: "health" },
    });
    const stored = (await rpc.registerCapability({ capability: governedCapability({ code: "odd_health", agentId: owner.agentId, health: CapabilityHealth.DEGRADED }) }, await as(owner))).capability!;
    expect(stored.health).toBe(CapabilityHealth.DEGRADED);
    const changing = await refusal(rpc.setCapabilityStatus({ id: stored.id, status: CapabilityStatus.ACTIVE, health: unknownHealth }, await as(owner)));
    expect({ code: changing.code, details: changing.detail?.details }).toEqual({ code: Code.InvalidArgument, details: { field: "health" } });
  });
});
