// The README's registry walkthrough as a user types it: a registry, two
// agents that join it, then agents, compliance, capability and audit.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli, startServe, type ServeProcess } from "./helpers/cli.js";
import { tempDir } from "./helpers/server.js";

let registry: ServeProcess;
let first: ServeProcess;
let second: ServeProcess;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  registry = await startServe(["--data-dir", await tempDir(), "--registry"]);
  first = await startServe(["--data-dir", await tempDir(), "--join", registry.url, "--agent-id", "agent_one"]);
  second = await startServe(["--data-dir", await tempDir(), "--join", registry.url, "--agent-id", "agent_two"]);
  env = { SYNAPSE_HOME: await tempDir("synapse-cli-home-") };
});
afterAll(async () => {
  expect(await second.stop()).toBe(0);
  expect(await first.stop()).toBe(0);
  expect(await registry.stop()).toBe(0);
});

const cli = (...args: string[]) => runCli(args, { env });

describe("registry walkthrough", () => {
  it("finds the joined agents by task type", async () => {
    const found = await cli("agents", registry.url, "--task-type", "summarization", "--json");
    expect(found.code).toBe(0);
    const agents = (JSON.parse(found.stdout) as { agents: Array<{ capabilities: { agentId: string }; health: string; endpointUrl: string }> }).agents;
    expect(agents.map((a) => a.capabilities.agentId).sort()).toEqual(["agent_one", "agent_two"]);
    expect(agents.every((a) => a.health === "AGENT_HEALTH_HEALTHY")).toBe(true);
    expect(agents.map((a) => a.endpointUrl).sort()).toEqual([first.url, second.url].sort());
    const none = await cli("agents", registry.url, "--task-type", "poetry");
    expect(none.stdout).toContain("no agents match");
  });

  it("evaluates a compliance list", async () => {
    const partial = await cli("compliance", registry.url, "--interface", "AgentIdentity,MessageHandler,CapabilitiesProvider");
    expect(partial.code).toBe(1);
    expect(partial.stdout).toContain("basic 3/8");
    expect(partial.stdout).toContain("missing basic interfaces: P2PTaskHandler, CallbackReceiver, HTTPTransport, Authenticator, IdempotencyHandler");
    const agent = await cli("compliance", registry.url, "--agent", "agent_one", "--json");
    expect(JSON.parse(agent.stdout)).toMatchObject({ evaluation: { compliant: true }, complianceLevel: "COMPLIANCE_BASIC" });
  });

  it("registers a governed capability, matches it by ontology, and audits its changes", async () => {
    const registered = await cli("capability", "register", registry.url, "--file", "docs/examples/duplicate-invoice-rule.json", "--json");
    expect(registered.code).toBe(0);
    const id = (JSON.parse(registered.stdout) as { capabilities: Array<{ id: string }> }).capabilities[0]!.id;
    expect(id).toBe("cap_duplicate_invoice_rule_v1_9");

    const matched = await cli(
      "capability", "match", registry.url,
      "--next-step", "run_rule", "--domain", "reimbursement", "--scenario", "invoice_validation", "--intent", "explain",
      "--risk-signal", "duplicate_invoice", "--permission", "reimbursement:read", "--permission", "risk:write",
    );
    expect(matched.stdout).toContain(`#1 ${id}`);
    expect(matched.stdout).toContain("step 1 next_step run_rule: rule capability");
    const withoutPermission = await cli("capability", "match", registry.url, "--domain", "reimbursement", "--permission", "reimbursement:read");
    expect(withoutPermission.stdout).toContain("no capability matches");

    const offline = await cli("capability", "status", registry.url, id, "--status", "offline", "--reason", "audit review", "--json");
    expect(offline.code).toBe(0);
    const audit = await cli("audit", registry.url, "--capability", id);
    expect(audit.stdout).toContain("CAPABILITY_STATUS_ACTIVE -> CAPABILITY_STATUS_OFFLINE (audit review)");

    const broken = await runCli(["capability", "register", registry.url, "--file", "-"], {
      env,
      input: JSON.stringify({ code: "x", name: "x", capability_type: "CAPABILITY_TYPE_SKILL", input_schema: "{}", output_schema: "{}", risk_level: "RISK_LEVEL_LOW", version: "1", status: "CAPABILITY_STATUS_ACTIVE" }),
    });
    expect(broken.code).toBe(1);
    expect(broken.stderr).toContain("owner");
  });

  it("lists the agents' task types in the catalogue", async () => {
    const matched = await cli("capability", "match", registry.url, "--domain", "data", "--intent", "analyze", "--json");
    const candidates = (JSON.parse(matched.stdout) as { candidates: Array<{ capability: { code: string; agentId: string } }> }).candidates;
    expect(candidates.map((c) => c.capability.code)).toEqual(["data_analysis", "data_analysis"]);
    expect(candidates.map((c) => c.capability.agentId).sort()).toEqual(["agent_one", "agent_two"]);
  });
});
