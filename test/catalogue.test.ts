// The governed capability catalogue (seed 003): governance rules at
// registration (§8), matching an ontology (§4, §5) with health degradation
// (§7), version supersession, the audit trail, agent-provided capabilities,
// and paging.
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { CapabilityGovernanceSchema, RiskLevel, SupportedTaskTypeSchema } from "../gen/synapse/v1/capabilities_pb.js";
import { ErrorCode, type ErrorDetail } from "../gen/synapse/v1/errors_pb.js";
import {
  AuditEventKind,
  CapabilityHealth,
  CapabilityStatus,
  CapabilityType,
  GovernedCapabilitySchema,
  OntologySchema,
  type AuditEvent,
  type GovernedCapability,
} from "../gen/synapse/v1/registry_pb.js";
import { findErrorDetail } from "../src/protocol/errors.js";
import { CapabilityCatalogue, checkGovernance, compareVersions, REGISTRY_ACTOR } from "../src/registry/catalogue.js";

const T0 = Date.parse("2026-01-01T00:00:00Z");

/** A catalogue on a clock the test moves. */
function catalogue() {
  const clock = { ms: T0 };
  const cat = new CapabilityCatalogue({ now: () => clock.ms });
  return { cat, clock, tick: (seconds = 1) => (clock.ms += seconds * 1000) };
}

type CapabilityInit = MessageInitShape<typeof GovernedCapabilitySchema>;

/** A capability that passes every governance rule, changed by `init`. */
function cap(init: CapabilityInit = {}): GovernedCapability {
  return create(GovernedCapabilitySchema, {
    code: "sample_rule",
    name: "Sample rule",
    capabilityType: CapabilityType.RULE,
    domain: "reimbursement",
    inputSchema: '{"type":"object"}',
    outputSchema: "{}",
    riskLevel: RiskLevel.LOW,
    owner: "财务风控组",
    version: "v1",
    status: CapabilityStatus.ACTIVE,
    ...init,
  });
}

function ontology(init: MessageInitShape<typeof OntologySchema>) {
  return create(OntologySchema, init);
}

/** The refusal `fn` throws: its RPC code and ErrorDetail. */
async function refusal(fn: () => unknown): Promise<{ code: Code; detail: ErrorDetail }> {
  try {
    await fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ConnectError);
    const detail = findErrorDetail(error);
    expect(detail).toBeDefined();
    return { code: ConnectError.from(error).code, detail: detail! };
  }
  throw new Error("expected a refusal");
}

async function expectRule(fn: () => unknown, rule: string): Promise<ErrorDetail> {
  const { code, detail } = await refusal(fn);
  expect(code).toBe(Code.InvalidArgument);
  expect(detail.code).toBe(ErrorCode.INVALID_PARAMS);
  expect(detail.details?.rule).toBe(rule);
  return detail;
}

async function allAudit(cat: CapabilityCatalogue, capabilityId?: string): Promise<AuditEvent[]> {
  return (await cat.listAudit({ capabilityId, pageSize: 1000 })).events;
}

/** The fields of an audit event a test compares: who, when, what, from, to, why. */
function summary(event: AuditEvent) {
  return {
    kind: AuditEventKind[event.kind],
    id: event.capabilityId,
    actor: event.actor,
    at: event.at ? timestampDate(event.at).toISOString() : "",
    from: event.from,
    to: event.to,
    reason: event.reason,
  };
}

describe("register: governance rules (seed 003 §8)", () => {
  it("accepts a complete capability", async () => {
    const { cat } = catalogue();
    expect((await cat.register(cap(), "alice")).id).toBe("cap_sample_rule_v1");
  });

  it("code_required", async () => {
    await expectRule(async () => (await catalogue().cat.register(cap({ code: " " }), "alice")), "code_required");
  });

  it("version_required", async () => {
    await expectRule(async () => (await catalogue().cat.register(cap({ version: "" }), "alice")), "version_required");
  });

  it("capability_type_required", async () => {
    await expectRule(async () => (await catalogue().cat.register(cap({ capabilityType: CapabilityType.UNSPECIFIED }), "alice")), "capability_type_required");
    await expectRule(async () => (await catalogue().cat.register(cap({ capabilityType: 99 as CapabilityType }), "alice")), "capability_type_required");
  });

  it("owner_required: 所有能力必须有 owner", async () => {
    await expectRule(async () => (await catalogue().cat.register(cap({ owner: "" }), "alice")), "owner_required");
  });

  it("high_risk_requires_reviewer: 高风险能力必须有 reviewer", async () => {
    const { cat } = catalogue();
    await expectRule(async () => (await cat.register(cap({ riskLevel: RiskLevel.HIGH }), "alice")), "high_risk_requires_reviewer");
    expect((await cat.register(cap({ riskLevel: RiskLevel.HIGH, reviewer: "合规部" }), "alice")).reviewer).toBe("合规部");
    // Medium risk needs none.
    expect((await cat.register(cap({ code: "medium", riskLevel: RiskLevel.MEDIUM }), "alice")).reviewer).toBe("");
  });

  it("risk_level_required", async () => {
    await expectRule(async () => (await catalogue().cat.register(cap({ riskLevel: RiskLevel.UNSPECIFIED }), "alice")), "risk_level_required");
  });

  it("input_schema_required", async () => {
    const detail = await expectRule(async () => (await catalogue().cat.register(cap({ inputSchema: "" }), "alice")), "input_schema_required");
    expect(detail.details?.schema).toBe("input_schema");
  });

  it("output_schema_required", async () => {
    const detail = await expectRule(async () => (await catalogue().cat.register(cap({ outputSchema: "  " }), "alice")), "output_schema_required");
    expect(detail.details?.schema).toBe("output_schema");
  });

  it("schema_invalid: not JSON, not a schema, or not compiling, naming the schema", async () => {
    const { cat } = catalogue();
    expect((await expectRule(async () => (await cat.register(cap({ inputSchema: "{type: object" }), "alice")), "schema_invalid")).details?.schema).toBe("input_schema");
    expect((await expectRule(async () => (await cat.register(cap({ outputSchema: '"a string"' }), "alice")), "schema_invalid")).details?.schema).toBe("output_schema");
    expect((await expectRule(async () => (await cat.register(cap({ outputSchema: "null" }), "alice")), "schema_invalid")).details?.schema).toBe("output_schema");
    expect((await expectRule(async () => (await cat.register(cap({ inputSchema: '{"type":"nope"}' }), "alice")), "schema_invalid")).details?.schema).toBe("input_schema");
    expect((await expectRule(async () => (await cat.register(cap({ outputSchema: '{"$ref":"#/definitions/missing"}' }), "alice")), "schema_invalid")).details?.schema).toBe(
      "output_schema",
    );
    // Boolean schemas, the seed's {} and schemas with an $id (twice) are fine.
    await cat.register(cap({ code: "a", inputSchema: "true" }), "alice");
    await cat.register(cap({ code: "b", inputSchema: '{"$id":"https://example.com/in","type":"object"}' }), "alice");
    await cat.register(cap({ code: "c", inputSchema: '{"$id":"https://example.com/in","type":"object"}' }), "alice");
    expect((await cat.list()).capabilities.map((c) => c.code)).toEqual(["a", "b", "c"]);
  });

  it("status_required: 所有能力必须有状态", async () => {
    await expectRule(async () => (await catalogue().cat.register(cap({ status: CapabilityStatus.UNSPECIFIED }), "alice")), "status_required");
  });

  it("an id already used by another code is refused", async () => {
    const { cat } = catalogue();
    await cat.register(cap({ id: "cap_rule_x" }), "alice");
    await expectRule(async () => (await cat.register(cap({ id: "cap_rule_x", code: "other" }), "alice")), "id_in_use");
  });

  it("checkGovernance applies the same rules without registering", async () => {
    expect(() => checkGovernance(cap())).not.toThrow();
    await expectRule(async () => checkGovernance(cap({ riskLevel: RiskLevel.HIGH })), "high_risk_requires_reviewer");
  });

  it("a refused registration changes nothing", async () => {
    const { cat } = catalogue();
    await cat.register(cap(), "alice");
    await expectRule(async () => (await cat.register(cap({ version: "v2", owner: "" }), "alice")), "owner_required");
    expect((await cat.list()).capabilities).toHaveLength(1);
    expect(await allAudit(cat)).toHaveLength(1);
  });
});

describe("register: ids, timestamps, audit", () => {
  it("defaults the id to cap_<code>_<version> and sets created_at and updated_at", async () => {
    const { cat } = catalogue();
    const stored = await cat.register(cap({ code: "duplicate_invoice_rule", version: "v1.9-RC+1" }), "alice");
    expect(stored.id).toBe("cap_duplicate_invoice_rule_v1_9____1");
    expect(timestampDate(stored.createdAt!).getTime()).toBe(T0);
    expect(timestampDate(stored.updatedAt!).getTime()).toBe(T0);
    expect(await cat.get(stored.id)).toEqual(stored);
    expect(await cat.get("cap_nothing")).toBeUndefined();
  });

  it("keeps an explicit id and records REGISTERED (from empty, to the version)", async () => {
    const { cat } = catalogue();
    await cat.register(cap({ id: "cap_rule_duplicate_invoice", version: "v1.9" }), "alice");
    expect((await allAudit(cat)).map(summary)).toEqual([
      { kind: "REGISTERED", id: "cap_rule_duplicate_invoice", actor: "alice", at: "2026-01-01T00:00:00.000Z", from: "", to: "v1.9", reason: "" },
    ]);
    expect((await allAudit(cat))[0]!.capabilityCode).toBe("sample_rule");
    expect((await allAudit(cat))[0]!.id).toBe("audit-000001");
  });

  it("re-registering an id keeps created_at and audits a version change and a status change", async () => {
    const { cat, tick } = catalogue();
    await cat.register(cap({ id: "cap_x", version: "v1.9" }), "alice");
    tick(60);
    const again = await cat.register(cap({ id: "cap_x", version: "v2.0", name: "renamed" }), "bob");
    expect(timestampDate(again.createdAt!).getTime()).toBe(T0);
    expect(timestampDate(again.updatedAt!).getTime()).toBe(T0 + 60_000);
    expect(again.name).toBe("renamed");
    tick(60);
    await cat.register(cap({ id: "cap_x", version: "v2.0", status: CapabilityStatus.DEPRECATED }), "carol");
    // Nothing governed changed: no event.
    await cat.register(cap({ id: "cap_x", version: "v2.0", status: CapabilityStatus.DEPRECATED, name: "again" }), "carol");
    expect((await allAudit(cat)).map(summary)).toEqual([
      { kind: "REGISTERED", id: "cap_x", actor: "alice", at: "2026-01-01T00:00:00.000Z", from: "", to: "v1.9", reason: "" },
      { kind: "VERSION_CHANGED", id: "cap_x", actor: "bob", at: "2026-01-01T00:01:00.000Z", from: "v1.9", to: "v2.0", reason: "re-registered" },
      {
        kind: "STATUS_CHANGED",
        id: "cap_x",
        actor: "carol",
        at: "2026-01-01T00:02:00.000Z",
        from: "CAPABILITY_STATUS_ACTIVE",
        to: "CAPABILITY_STATUS_DEPRECATED",
        reason: "re-registered",
      },
    ]);
    expect((await allAudit(cat)).map((event) => event.id)).toEqual(["audit-000001", "audit-000002", "audit-000003"]);
  });

  it("hands out copies: changing a returned record changes nothing stored", async () => {
    const { cat } = catalogue();
    const stored = await cat.register(cap(), "alice");
    stored.owner = "mallory";
    (await cat.get(stored.id))!.status = CapabilityStatus.OFFLINE;
    expect(await cat.get(stored.id)).toMatchObject({ owner: "财务风控组", status: CapabilityStatus.ACTIVE });
  });
});

describe("version supersession", () => {
  it("a new ACTIVE version makes the older one INACTIVE, audited with who, when, from and to", async () => {
    const { cat, tick } = catalogue();
    const v19 = await cat.register(cap({ code: "duplicate_invoice_rule", version: "v1.9" }), "alice");
    tick(3600);
    const v20 = await cat.register(cap({ code: "duplicate_invoice_rule", version: "v2.0" }), "bob");
    expect((await cat.get(v19.id))?.status).toBe(CapabilityStatus.INACTIVE);
    expect(timestampDate((await cat.get(v19.id))!.updatedAt!).getTime()).toBe(T0 + 3_600_000);
    expect((await cat.get(v20.id))?.status).toBe(CapabilityStatus.ACTIVE);
    expect((await allAudit(cat)).map(summary)).toEqual([
      { kind: "REGISTERED", id: v19.id, actor: "alice", at: "2026-01-01T00:00:00.000Z", from: "", to: "v1.9", reason: "" },
      { kind: "REGISTERED", id: v20.id, actor: "bob", at: "2026-01-01T01:00:00.000Z", from: "", to: "v2.0", reason: "" },
      {
        kind: "STATUS_CHANGED",
        id: v19.id,
        actor: REGISTRY_ACTOR,
        at: "2026-01-01T01:00:00.000Z",
        from: "CAPABILITY_STATUS_ACTIVE",
        to: "CAPABILITY_STATUS_INACTIVE",
        reason: "superseded by v2.0",
      },
      { kind: "VERSION_CHANGED", id: v20.id, actor: "bob", at: "2026-01-01T01:00:00.000Z", from: "v1.9", to: "v2.0", reason: `supersedes ${v19.id}` },
    ]);
    expect((await allAudit(cat)).every((event) => event.capabilityCode === "duplicate_invoice_rule")).toBe(true);

    // Matching uses the current version only.
    const matches = await cat.match(ontology({ nextStep: "run_rule" }), []);
    expect(matches.map((m) => m.capability?.version)).toEqual(["v2.0"]);
    expect(matches[0]!.reasons).toContain("step 8 version v2.0: current");
  });

  it("a DEPRECATED or INACTIVE registration supersedes nothing", async () => {
    const { cat } = catalogue();
    await cat.register(cap({ version: "v1" }), "alice");
    await cat.register(cap({ version: "v0", status: CapabilityStatus.DEPRECATED }), "alice");
    await cat.register(cap({ version: "v3", status: CapabilityStatus.INACTIVE }), "alice");
    expect((await cat.list({ statuses: [CapabilityStatus.ACTIVE] })).capabilities.map((c) => c.version)).toEqual(["v1"]);
  });

  it("activating an older version with setStatus rolls back: the current one becomes INACTIVE", async () => {
    const { cat } = catalogue();
    const v1 = await cat.register(cap({ version: "v1" }), "alice");
    const v2 = await cat.register(cap({ version: "v2" }), "alice");
    await cat.setStatus(v1.id, CapabilityStatus.ACTIVE, "v2 misfires", "ops");
    expect((await cat.get(v2.id))?.status).toBe(CapabilityStatus.INACTIVE);
    const tail = (await allAudit(cat)).slice(-3).map(summary);
    expect(tail.map((e) => [e.kind, e.id, e.actor, e.from, e.to, e.reason])).toEqual([
      ["STATUS_CHANGED", v1.id, "ops", "CAPABILITY_STATUS_INACTIVE", "CAPABILITY_STATUS_ACTIVE", "v2 misfires"],
      ["STATUS_CHANGED", v2.id, REGISTRY_ACTOR, "CAPABILITY_STATUS_ACTIVE", "CAPABILITY_STATUS_INACTIVE", "superseded by v1"],
      ["VERSION_CHANGED", v1.id, "ops", "v2", "v1", `supersedes ${v2.id}`],
    ]);
  });
});

describe("setStatus", () => {
  it("records who, when, from, to and why, and replaces the health when given", async () => {
    const { cat, tick } = catalogue();
    const stored = await cat.register(cap(), "alice");
    tick(10);
    const changed = await cat.setStatus(stored.id, CapabilityStatus.OFFLINE, "vendor outage", "ops", CapabilityHealth.UNHEALTHY);
    expect(changed.status).toBe(CapabilityStatus.OFFLINE);
    expect(changed.health).toBe(CapabilityHealth.UNHEALTHY);
    expect(timestampDate(changed.updatedAt!).getTime()).toBe(T0 + 10_000);
    expect(summary((await allAudit(cat, stored.id))[1]!)).toEqual({
      kind: "STATUS_CHANGED",
      id: stored.id,
      actor: "ops",
      at: "2026-01-01T00:00:10.000Z",
      from: "CAPABILITY_STATUS_ACTIVE",
      to: "CAPABILITY_STATUS_OFFLINE",
      reason: "vendor outage",
    });
    // UNSPECIFIED health keeps it; the same status records nothing.
    const same = await cat.setStatus(stored.id, CapabilityStatus.OFFLINE, "again", "ops");
    expect(same.health).toBe(CapabilityHealth.UNHEALTHY);
    expect(await allAudit(cat)).toHaveLength(2);
    // Health alone changes no status and records nothing.
    expect((await cat.setStatus(stored.id, CapabilityStatus.OFFLINE, "", "ops", CapabilityHealth.DEGRADED)).health).toBe(CapabilityHealth.DEGRADED);
    expect(await allAudit(cat)).toHaveLength(2);
  });

  it("refuses a health CapabilityHealth does not name, here and at registration", async () => {
    const { cat } = catalogue();
    const stored = await cat.register(cap(), "alice");
    const atStatus = await refusal(() => cat.setStatus(stored.id, CapabilityStatus.OFFLINE, "", "ops", 9 as CapabilityHealth));
    expect({ code: atStatus.code, protocolCode: atStatus.detail.protocolCode, details: atStatus.detail.details }).toEqual({
      code: Code.InvalidArgument,
      protocolCode: "invalid_params",
      details: { field: "health" },
    });
    const atRegister = await refusal(() => cat.register(cap({ code: "other_rule", health: 9 as CapabilityHealth }), "alice"));
    expect({ code: atRegister.code, details: atRegister.detail.details }).toEqual({ code: Code.InvalidArgument, details: { field: "health" } });
    expect(await cat.get("cap_other_rule_v1")).toBeUndefined();
    // The four named values are all accepted.
    for (const health of [CapabilityHealth.UNSPECIFIED, CapabilityHealth.HEALTHY, CapabilityHealth.DEGRADED, CapabilityHealth.UNHEALTHY]) {
      expect((await cat.register(cap({ code: `rule_${health}`, health }), "alice")).health).toBe(health);
    }
  });

  it("an unknown id is NOT_FOUND with an invalid_params ErrorDetail", async () => {
    const { code, detail } = await refusal(async () => (await catalogue().cat.setStatus("cap_missing", CapabilityStatus.OFFLINE, "", "ops")));
    expect(code).toBe(Code.NotFound);
    expect(detail.code).toBe(ErrorCode.INVALID_PARAMS);
  });

  it("status_required for UNSPECIFIED", async () => {
    const { cat } = catalogue();
    const stored = await cat.register(cap(), "alice");
    await expectRule(async () => (await cat.setStatus(stored.id, CapabilityStatus.UNSPECIFIED, "", "ops")), "status_required");
  });
});

// The example of seed 003 §3-§4: four capabilities that all fit the
// ontology {reimbursement, invoice_validation, explain, [duplicate_invoice], run_rule}.
async function seedCatalogue() {
  const { cat, clock, tick } = catalogue();
  const permissions = ["reimbursement:read", "risk:write", "invoice:verify", "knowledge:read"];
  await cat.register(
    cap({
      id: "cap_rule_duplicate_invoice",
      code: "duplicate_invoice_rule",
      name: "重复报销识别规则",
      capabilityType: CapabilityType.RULE,
      domain: "reimbursement",
      scenarios: ["invoice_validation", "reimbursement_audit"],
      intents: ["validate", "explain", "monitor"],
      inputSchema: "{}",
      outputSchema: "{}",
      permissionRequired: ["reimbursement:read", "risk:write"],
      riskLevel: RiskLevel.HIGH,
      owner: "财务风控组",
      reviewer: "合规部",
      version: "v1.9",
      riskSignals: ["duplicate_invoice"],
    }),
    "alice",
  );
  await cat.register(
    cap({
      code: "invoice_verification_mcp",
      name: "发票验真 MCP",
      capabilityType: CapabilityType.MCP,
      scenarios: ["invoice_validation"],
      intents: ["validate"],
      permissionRequired: ["invoice:verify"],
      riskSignals: ["fake_invoice"],
      version: "v2",
    }),
    "alice",
  );
  await cat.register(
    cap({
      code: "risk_explanation_skill",
      name: "风险解释技能",
      capabilityType: CapabilityType.SKILL,
      scenarios: ["invoice_validation", "approval"],
      intents: ["explain"],
      riskSignals: ["duplicate_invoice", "over_budget"],
      version: "v1",
    }),
    "alice",
  );
  await cat.register(
    cap({
      code: "policy_knowledge_search",
      name: "制度知识库检索",
      capabilityType: CapabilityType.KNOWLEDGE_SEARCH,
      scenarios: ["invoice_validation"],
      intents: ["explain", "answer"],
      permissionRequired: ["knowledge:read"],
      version: "v1",
    }),
    "alice",
  );
  // Not candidates: another domain, and a capability of the domain matching no given step.
  await cat.register(cap({ code: "travel_rule", domain: "travel", scenarios: ["invoice_validation"], riskSignals: ["duplicate_invoice"] }), "alice");
  await cat.register(cap({ code: "month_end_notice", capabilityType: CapabilityType.NOTIFICATION, scenarios: ["month_end"], intents: ["notify"] }), "alice");
  const example = ontology({
    domain: "reimbursement",
    scenario: "invoice_validation",
    intent: "explain",
    riskSignals: ["duplicate_invoice"],
    nextStep: "run_rule",
  });
  return { cat, clock, tick, permissions, example };
}

describe("match: the seed 003 example", () => {
  it("ranks the duplicate-invoice rule first, then by the documented score", async () => {
    const { cat, permissions, example } = await seedCatalogue();
    const matches = await cat.match(example, permissions);
    expect(matches.map((m) => [m.rank, m.capability?.code, m.score])).toEqual([
      [1, "duplicate_invoice_rule", 110_111], // type, scenario, 1 signal, intent, exact domain
      [2, "risk_explanation_skill", 10_111], // scenario, 1 signal, intent, exact domain
      [3, "policy_knowledge_search", 10_011], // scenario, intent, exact domain
      [4, "invoice_verification_mcp", 10_001], // scenario, exact domain
    ]);
    expect(matches[0]!.reasons).toEqual([
      "step 1 next_step run_rule: rule capability",
      "step 2 domain reimbursement: matched",
      "step 3 scenario invoice_validation: matched",
      "step 4 risk_signals duplicate_invoice: matched duplicate_invoice",
      "step 5 intent explain: matched",
      "step 6 permissions: covered",
      "step 7 status: active",
      "step 8 version v1.9: current",
    ]);
    expect(matches[3]!.reasons).toContain("step 1 next_step run_rule: mcp capability, not rule");
    expect(matches[3]!.reasons).toContain("step 5 intent explain: not served");
  });

  it("step 6: a capability needing a permission the caller lacks is left out", async () => {
    const { cat, example } = await seedCatalogue();
    const codes = (await cat.match(example, ["reimbursement:read", "knowledge:read"])).map((m) => m.capability?.code);
    expect(codes).toEqual(["risk_explanation_skill", "policy_knowledge_search"]);
    expect((await cat.match(example, [])).map((m) => m.capability?.code)).toEqual(["risk_explanation_skill"]);
  });

  it("step 2: an empty domain matches any domain, below an exact match", async () => {
    const { cat, permissions, example } = await seedCatalogue();
    await cat.register(cap({ code: "generic_explainer", capabilityType: CapabilityType.SKILL, domain: "", scenarios: ["invoice_validation", "approval"], intents: ["explain"], riskSignals: ["duplicate_invoice"] }), "alice");
    const matches = await cat.match(example, permissions);
    expect(matches.slice(1, 3).map((m) => [m.capability?.code, m.score])).toEqual([
      ["risk_explanation_skill", 10_111],
      ["generic_explainer", 10_110],
    ]);
    expect(matches[2]!.reasons).toContain("step 2 domain reimbursement: any domain");
  });

  it("a domain alone makes every capability of that domain a candidate", async () => {
    const { cat, permissions } = await seedCatalogue();
    const codes = (await cat.match(ontology({ domain: "reimbursement" }), permissions)).map((m) => m.capability?.code);
    expect(codes).toEqual(["duplicate_invoice_rule", "invoice_verification_mcp", "month_end_notice", "policy_knowledge_search", "risk_explanation_skill"]);
    expect((await cat.match(ontology({ domain: "travel" }), permissions)).map((m) => m.capability?.code)).toEqual(["travel_rule"]);
  });

  it("more shared risk signals rank higher, and each step outweighs every later one", async () => {
    const { cat } = catalogue();
    await cat.register(cap({ code: "two_signals", capabilityType: CapabilityType.SKILL, riskSignals: ["a", "b"] }), "alice");
    await cat.register(cap({ code: "one_signal_intent", capabilityType: CapabilityType.SKILL, riskSignals: ["a"], intents: ["explain"] }), "alice");
    await cat.register(cap({ code: "scenario_only", capabilityType: CapabilityType.SKILL, scenarios: ["s"] }), "alice");
    await cat.register(cap({ code: "type_only", capabilityType: CapabilityType.RULE }), "alice");
    const matches = await cat.match(ontology({ nextStep: "run_rule", scenario: "s", riskSignals: ["a", "b", "a"], intent: "explain" }), []);
    expect(matches.map((m) => [m.capability?.code, m.score])).toEqual([
      ["type_only", 100_000],
      ["scenario_only", 10_000],
      ["two_signals", 200],
      ["one_signal_intent", 110],
    ]);
  });

  it("next_step accepts the mapped steps and capability type names; anything else is refused", async () => {
    const { cat, permissions } = await seedCatalogue();
    expect((await cat.match(ontology({ nextStep: "call_mcp", domain: "reimbursement" }), permissions))[0]?.capability?.code).toBe("invoice_verification_mcp");
    expect((await cat.match(ontology({ nextStep: "search_knowledge" }), permissions)).map((m) => m.capability?.code)).toEqual(["policy_knowledge_search"]);
    expect((await cat.match(ontology({ nextStep: "skill" }), permissions)).map((m) => m.capability?.code)).toEqual(["risk_explanation_skill"]);
    expect((await cat.match(ontology({ nextStep: "CAPABILITY_TYPE_NOTIFICATION" }), permissions)).map((m) => m.capability?.code)).toEqual(["month_end_notice"]);
    expect((await cat.match(ontology({ nextStep: "notify" }), permissions)).map((m) => m.capability?.code)).toEqual(["month_end_notice"]);
    const { code, detail } = await refusal(async () => (await cat.match(ontology({ nextStep: "teleport" }), permissions)));
    expect(code).toBe(Code.InvalidArgument);
    expect(detail.details?.field).toBe("next_step");
  });

  it("limit caps the candidates", async () => {
    const { cat, permissions, example } = await seedCatalogue();
    expect((await cat.match(example, permissions, 2)).map((m) => m.rank)).toEqual([1, 2]);
    expect(await cat.match(example, permissions, 0)).toHaveLength(4);
  });
});

describe("match: status, version and health", () => {
  it("step 7: INACTIVE and OFFLINE capabilities are never matched", async () => {
    const { cat, permissions, example } = await seedCatalogue();
    await cat.setStatus("cap_rule_duplicate_invoice", CapabilityStatus.OFFLINE, "taken down", "ops");
    await cat.setStatus("cap_risk_explanation_skill_v1", CapabilityStatus.INACTIVE, "paused", "ops");
    const codes = (await cat.match(example, permissions)).map((m) => m.capability?.code);
    expect(codes).toEqual(["policy_knowledge_search", "invoice_verification_mcp"]);
  });

  it("step 8: with an ACTIVE version, DEPRECATED older ones are not matched; with none, the newest DEPRECATED is", async () => {
    const { cat } = catalogue();
    await cat.register(cap({ version: "v1.9", status: CapabilityStatus.DEPRECATED }), "alice");
    await cat.register(cap({ version: "v1.10", status: CapabilityStatus.DEPRECATED }), "alice");
    await cat.register(cap({ version: "v2.0" }), "alice");
    const rule = ontology({ nextStep: "run_rule" });
    expect((await cat.match(rule, [])).map((m) => m.capability?.version)).toEqual(["v2.0"]);
    await cat.setStatus("cap_sample_rule_v2_0", CapabilityStatus.OFFLINE, "broken", "ops");
    const matches = await cat.match(rule, []);
    expect(matches.map((m) => m.capability?.version)).toEqual(["v1.10"]);
    expect(matches[0]!.reasons).toContain("step 7 status: deprecated");
  });

  it("DEPRECATED capabilities come after the others, even with a higher score", async () => {
    const { cat, permissions, example } = await seedCatalogue();
    await cat.setStatus("cap_rule_duplicate_invoice", CapabilityStatus.DEPRECATED, "being retired", "ops");
    const matches = await cat.match(example, permissions);
    expect(matches.map((m) => m.capability?.code)).toEqual(["risk_explanation_skill", "policy_knowledge_search", "invoice_verification_mcp", "duplicate_invoice_rule"]);
    expect(matches[3]!.score).toBe(110_111);
  });

  it("UNHEALTHY after DEGRADED after HEALTHY (or unreported), even with a higher score", async () => {
    const { cat, permissions, example } = await seedCatalogue();
    await cat.setStatus("cap_rule_duplicate_invoice", CapabilityStatus.ACTIVE, "", "monitor", CapabilityHealth.UNHEALTHY);
    await cat.setStatus("cap_risk_explanation_skill_v1", CapabilityStatus.ACTIVE, "", "monitor", CapabilityHealth.DEGRADED);
    await cat.setStatus("cap_invoice_verification_mcp_v2", CapabilityStatus.ACTIVE, "", "monitor", CapabilityHealth.HEALTHY);
    const matches = await cat.match(example, permissions);
    expect(matches.map((m) => m.capability?.code)).toEqual(["policy_knowledge_search", "invoice_verification_mcp", "risk_explanation_skill", "duplicate_invoice_rule"]);
    expect(matches[3]!.reasons).toContain("health: unhealthy, ranked after healthier capabilities");
    // Health outranks deprecation: a healthy deprecated one beats an unhealthy active one.
    await cat.setStatus("cap_policy_knowledge_search_v1", CapabilityStatus.DEPRECATED, "", "ops");
    expect((await cat.match(example, permissions)).map((m) => m.capability?.code).slice(0, 2)).toEqual(["invoice_verification_mcp", "policy_knowledge_search"]);
  });
});

describe("capabilities an agent provides", () => {
  const summarize = {
    type: "text_summary",
    name: "Summarize",
    inputSchema: '{"type":"object","required":["text"]}',
    outputSchema: '{"type":"object"}',
  };

  it("fromTaskType maps a governed task type, and nothing without governance", async () => {
    const { cat } = catalogue();
    const taskType = create(SupportedTaskTypeSchema, {
      ...summarize,
      governance: create(CapabilityGovernanceSchema, {
        domain: "reimbursement",
        scenarios: ["approval"],
        intents: ["summarize"],
        permissionRequired: ["reimbursement:read"],
        riskLevel: RiskLevel.MEDIUM,
        owner: "平台组",
        requiresConfirmation: true,
        riskSignals: ["long_text"],
      }),
    });
    expect(cat.fromTaskType("agent_a", taskType)).toMatchObject({
      id: "",
      code: "text_summary",
      name: "Summarize",
      capabilityType: CapabilityType.TASK,
      domain: "reimbursement",
      scenarios: ["approval"],
      intents: ["summarize"],
      inputSchema: summarize.inputSchema,
      outputSchema: summarize.outputSchema,
      permissionRequired: ["reimbursement:read"],
      riskLevel: RiskLevel.MEDIUM,
      owner: "平台组",
      version: "1.0.0",
      status: CapabilityStatus.ACTIVE,
      requiresConfirmation: true,
      riskSignals: ["long_text"],
      agentId: "agent_a",
      taskType: "text_summary",
    });
    expect(cat.fromTaskType("agent_a", create(SupportedTaskTypeSchema, summarize))).toBeUndefined();
    // Empty task-type schemas mean "any object" and "unconstrained", and pass the schema rules.
    const bare = cat.fromTaskType("agent_a", create(SupportedTaskTypeSchema, { type: "echo", governance: { owner: "x", riskLevel: RiskLevel.LOW, version: "2.1" } }))!;
    expect([bare.inputSchema, bare.outputSchema, bare.version]).toEqual(['{"type":"object"}', "{}", "2.1"]);
    expect(await cat.syncAgent("agent_a", [bare], "agent_a")).toEqual(["cap_agent_a_echo_2_1"]);
  });

  it("syncAgent registers with agent_id, takes unlisted capabilities OFFLINE, and audits both", async () => {
    const { cat, tick } = catalogue();
    const ids = await cat.syncAgent("agent_a", [cap({ code: "summarize", capabilityType: CapabilityType.TASK }), cap({ code: "translate", capabilityType: CapabilityType.TASK })], "agent_a");
    expect(ids).toEqual(["cap_agent_a_summarize_v1", "cap_agent_a_translate_v1"]);
    expect((await cat.get(ids[0]!))?.agentId).toBe("agent_a");
    tick(30);
    expect(await cat.syncAgent("agent_a", [cap({ code: "summarize", capabilityType: CapabilityType.TASK })], "agent_a")).toEqual([ids[0]]);
    expect((await cat.get(ids[1]!))?.status).toBe(CapabilityStatus.OFFLINE);
    expect(summary((await allAudit(cat, ids[1])).at(-1)!)).toEqual({
      kind: "STATUS_CHANGED",
      id: ids[1],
      actor: "agent_a",
      at: "2026-01-01T00:00:30.000Z",
      from: "CAPABILITY_STATUS_ACTIVE",
      to: "CAPABILITY_STATUS_OFFLINE",
      reason: "no longer provided by agent agent_a",
    });
    expect((await cat.match(ontology({ nextStep: "run_task" }), [])).map((m) => m.capability?.id)).toEqual([ids[0]]);
  });

  it("two agents providing the same code are separate candidates, and one's upgrade supersedes only its own", async () => {
    const { cat } = catalogue();
    const [a] = await cat.syncAgent("agent_a", [cap({ code: "summarize", capabilityType: CapabilityType.TASK, version: "1.0.0" })], "agent_a");
    const [b1] = await cat.syncAgent("agent_b", [cap({ code: "summarize", capabilityType: CapabilityType.TASK, version: "1.0.0" })], "agent_b");
    const [b2] = await cat.syncAgent("agent_b", [cap({ code: "summarize", capabilityType: CapabilityType.TASK, version: "1.1.0" })], "agent_b");
    expect((await cat.get(a!))?.status).toBe(CapabilityStatus.ACTIVE);
    expect((await cat.get(b1!))?.status).toBe(CapabilityStatus.INACTIVE); // superseded, then not re-listed: it stays INACTIVE
    expect((await cat.match(ontology({ nextStep: "run_task" }), [])).map((m) => m.capability?.id)).toEqual([a, b2]);
  });

  it("syncAgent is all or nothing", async () => {
    const { cat } = catalogue();
    const [kept] = await cat.syncAgent("agent_a", [cap({ code: "old" })], "agent_a");
    await expectRule(async () => (await cat.syncAgent("agent_a", [cap({ code: "new" }), cap({ code: "bad", owner: "" })], "agent_a")), "owner_required");
    expect((await cat.list()).capabilities.map((c) => c.id)).toEqual([kept]);
    expect((await cat.get(kept!))?.status).toBe(CapabilityStatus.ACTIVE);
    expect(await allAudit(cat)).toHaveLength(1);
  });

  it("an agent cannot take over another agent's or a static capability id", async () => {
    const { cat } = catalogue();
    await cat.register(cap({ id: "cap_static" }), "alice");
    await expectRule(async () => (await cat.syncAgent("agent_a", [cap({ id: "cap_static" })], "agent_a")), "id_in_use");
  });

  it("setAgentHealth follows the lease and ranks an unhealthy agent's capabilities last", async () => {
    const { cat } = catalogue();
    const [a] = await cat.syncAgent("agent_a", [cap({ code: "summarize_a", capabilityType: CapabilityType.TASK, intents: ["summarize", "explain"] })], "agent_a");
    const [b] = await cat.syncAgent("agent_b", [cap({ code: "summarize_b", capabilityType: CapabilityType.TASK, intents: ["summarize"] })], "agent_b");
    const wanted = ontology({ nextStep: "run_task", intent: "explain" });
    expect((await cat.match(wanted, [])).map((m) => m.capability?.id)).toEqual([a, b]);
    expect(await cat.setAgentHealth("agent_a", CapabilityHealth.UNHEALTHY, REGISTRY_ACTOR)).toEqual([a]);
    expect(await cat.setAgentHealth("agent_a", CapabilityHealth.UNHEALTHY, REGISTRY_ACTOR)).toEqual([]);
    expect((await cat.match(wanted, [])).map((m) => m.capability?.id)).toEqual([b, a]);
    expect((await cat.get(b!))?.health).toBe(CapabilityHealth.UNSPECIFIED);
    expect(await allAudit(cat)).toHaveLength(2); // health is not audited
    expect((await refusal(async () => (await cat.setAgentHealth("", CapabilityHealth.UNHEALTHY, REGISTRY_ACTOR)))).code).toBe(Code.InvalidArgument);
  });

  it("retireAgent takes every capability of the agent OFFLINE, audited, and out of matching", async () => {
    const { cat, tick } = catalogue();
    const ids = await cat.syncAgent("agent_a", [cap({ code: "x", capabilityType: CapabilityType.TASK }), cap({ code: "y", capabilityType: CapabilityType.TASK })], "agent_a");
    const [other] = await cat.syncAgent("agent_b", [cap({ code: "z", capabilityType: CapabilityType.TASK })], "agent_b");
    tick(5);
    expect(await cat.retireAgent("agent_a", "deregistered", "agent_a")).toEqual(ids);
    expect(await cat.retireAgent("agent_a", "again", "agent_a")).toEqual([]);
    expect(await Promise.all(ids.map(async (id) => (await cat.get(id))?.status))).toEqual([CapabilityStatus.OFFLINE, CapabilityStatus.OFFLINE]);
    expect((await allAudit(cat)).slice(-2).map(summary)).toEqual(
      ids.map((id) => ({
        kind: "STATUS_CHANGED",
        id,
        actor: "agent_a",
        at: "2026-01-01T00:00:05.000Z",
        from: "CAPABILITY_STATUS_ACTIVE",
        to: "CAPABILITY_STATUS_OFFLINE",
        reason: "deregistered",
      })),
    );
    expect((await cat.match(ontology({ nextStep: "run_task" }), [])).map((m) => m.capability?.id)).toEqual([other]);
    // Registering again brings them back, audited.
    await cat.syncAgent("agent_a", [cap({ code: "x", capabilityType: CapabilityType.TASK })], "agent_a");
    expect(summary((await allAudit(cat, ids[0])).at(-1)!)).toMatchObject({ kind: "STATUS_CHANGED", from: "CAPABILITY_STATUS_OFFLINE", to: "CAPABILITY_STATUS_ACTIVE" });
  });
});

describe("list and listAudit", () => {
  async function listed() {
    const { cat } = catalogue();
    await cat.register(cap({ code: "b_rule", version: "v1.10" }), "alice");
    await cat.register(cap({ code: "b_rule", version: "v1.9", status: CapabilityStatus.DEPRECATED }), "alice");
    await cat.register(cap({ code: "a_skill", capabilityType: CapabilityType.SKILL, domain: "travel" }), "alice");
    await cat.register(cap({ code: "c_mcp", capabilityType: CapabilityType.MCP }), "alice");
    await cat.register(cap({ code: "b_rule", version: "v2" }), "alice");
    return cat;
  }

  it("orders by code, then version, and filters by type, domain, statuses and code", async () => {
    const cat = await listed();
    const all = (await cat.list()).capabilities.map((c) => `${c.code}@${c.version}`);
    expect(all).toEqual(["a_skill@v1", "b_rule@v1.9", "b_rule@v1.10", "b_rule@v2", "c_mcp@v1"]);
    expect((await cat.list({ capabilityType: CapabilityType.RULE })).capabilities).toHaveLength(3);
    expect((await cat.list({ domain: "travel" })).capabilities.map((c) => c.code)).toEqual(["a_skill"]);
    expect((await cat.list({ statuses: [CapabilityStatus.INACTIVE, CapabilityStatus.DEPRECATED] })).capabilities.map((c) => c.version)).toEqual(["v1.9", "v1.10"]);
    expect((await cat.list({ code: "b_rule", statuses: [CapabilityStatus.ACTIVE] })).capabilities.map((c) => c.version)).toEqual(["v2"]);
  });

  it("pages with an opaque token until the last page", async () => {
    const cat = await listed();
    const seen: string[] = [];
    let token = "";
    let pages = 0;
    do {
      const page = await cat.list({ pageSize: 2, pageToken: token });
      seen.push(...page.capabilities.map((c) => c.id));
      token = page.nextPageToken;
      pages++;
    } while (token !== "");
    expect(pages).toBe(3);
    expect(seen).toEqual((await cat.list()).capabilities.map((c) => c.id));
  });

  it("refuses a page token it did not issue and a negative page size", async () => {
    const cat = await listed();
    expect((await refusal(async () => (await cat.list({ pageToken: "not-a-token" })))).code).toBe(Code.InvalidArgument);
    expect((await refusal(async () => (await cat.list({ pageToken: Buffer.from('{"c":1}').toString("base64url") })))).detail.details?.field).toBe("page_token");
    expect((await refusal(async () => (await cat.list({ pageSize: -1 })))).code).toBe(Code.InvalidArgument);
    expect((await refusal(async () => (await cat.listAudit({ pageToken: "%%%" })))).code).toBe(Code.InvalidArgument);
  });

  it("pages the audit trail oldest first, filtered by capability", async () => {
    const cat = await listed();
    const all = await allAudit(cat);
    // 5 REGISTERED, plus v1.10 superseded by v2 (STATUS_CHANGED and VERSION_CHANGED).
    expect(all.map((e) => e.id)).toEqual(["audit-000001", "audit-000002", "audit-000003", "audit-000004", "audit-000005", "audit-000006", "audit-000007"]);
    const first = await cat.listAudit({ pageSize: 3 });
    const second = await cat.listAudit({ pageSize: 3, pageToken: first.nextPageToken });
    const third = await cat.listAudit({ pageSize: 3, pageToken: second.nextPageToken });
    expect([...first.events, ...second.events, ...third.events].map((e) => e.id)).toEqual(all.map((e) => e.id));
    expect(third.nextPageToken).toBe("");

    const v110 = "cap_b_rule_v1_10";
    const own = await cat.listAudit({ capabilityId: v110, pageSize: 1 });
    expect(own.events.map((e) => AuditEventKind[e.kind])).toEqual(["REGISTERED"]);
    const rest = await cat.listAudit({ capabilityId: v110, pageSize: 1, pageToken: own.nextPageToken });
    expect(rest.events.map((e) => [AuditEventKind[e.kind], e.to])).toEqual([["STATUS_CHANGED", "CAPABILITY_STATUS_INACTIVE"]]);
    expect(rest.nextPageToken).toBe("");
  });
});

describe("compareVersions", () => {
  it("orders versions naturally", async () => {
    const sorted = ["v1.10", "1.0.0", "v1.9", "1.0.0-beta", "v2", "1.0.10", "1.0.2"].sort(compareVersions);
    expect(sorted).toEqual(["1.0.0-beta", "1.0.0", "1.0.2", "1.0.10", "v1.9", "v1.10", "v2"]);
  });
});
