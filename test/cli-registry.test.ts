// The README's registry walkthrough as a user types it: an operator key, a
// registry that names it admin, two agents that join it, then agents,
// compliance, capability, permissions and audit; and who may join under a
// name: the registry's trust store binds names, --registry-open-names lets
// anyone take one.
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Compliance } from "../gen/synapse/v1/capabilities_pb.js";
import { SERVED_LEVEL } from "./helpers/interfaces.js";
import { runCli, startServe, type ServeProcess } from "./helpers/cli.js";
import { tempDir } from "./helpers/server.js";

let registry: ServeProcess;
let first: ServeProcess;
let second: ServeProcess;
let env: NodeJS.ProcessEnv;
let ops: string;

/** The key id `synapse keygen` prints, as the README reads it. */
async function keyIdOf(home: string): Promise<string> {
  const shown = await runCli(["keygen", "--home", home]);
  return /^key id: *(\S+)$/m.exec(shown.stdout)![1]!;
}

beforeAll(async () => {
  ops = await tempDir("synapse-ops-");
  registry = await startServe(["--data-dir", await tempDir(), "--registry", `--registry-admin=${await keyIdOf(ops)}`]);
  // Their ids are derived from their keys (the default), so they need nobody to bind them.
  first = await startServe(["--data-dir", await tempDir(), "--join", registry.url]);
  second = await startServe(["--data-dir", await tempDir(), "--join", registry.url]);
  await Promise.all([joined(first), joined(second)]);
  env = { SYNAPSE_HOME: await tempDir("synapse-cli-home-") };
});
afterAll(async () => {
  expect(await second.stop()).toBe(0);
  expect(await first.stop()).toBe(0);
  expect(await registry.stop()).toBe(0);
});

const cli = (...args: string[]) => runCli(args, { env });

/** Resolves once `serve --join` has registered. */
async function joined(server: ServeProcess): Promise<void> {
  for (let i = 0; i < 200 && !server.stdout().includes("joined registry"); i++) await new Promise((resolve) => setTimeout(resolve, 50));
  expect(server.stdout()).toContain("joined registry");
}

describe("registry walkthrough", () => {
  it("finds the joined agents by task type", async () => {
    const found = await cli("agents", registry.url, "--task-type", "summarization", "--json");
    expect(found.code).toBe(0);
    const agents = (JSON.parse(found.stdout) as { agents: Array<{ capabilities: { agentId: string }; health: string; endpointUrl: string }> }).agents;
    expect(agents.map((a) => a.capabilities.agentId).sort()).toEqual([first.agentId, second.agentId].sort());
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
    const agent = await cli("compliance", registry.url, "--agent", first.agentId, "--json");
    expect(JSON.parse(agent.stdout)).toMatchObject({ evaluation: { compliant: true }, complianceLevel: `COMPLIANCE_${Compliance[SERVED_LEVEL]}` });
  });

  it("the operator registers a capability and grants permissions; matching counts them; a stranger cannot change it; all audited", async () => {
    const registered = await cli("capability", "register", registry.url, "--file", "docs/examples/duplicate-invoice-rule.json", "--home", ops, "--json");
    expect(registered.code).toBe(0);
    const id = (JSON.parse(registered.stdout) as { capabilities: Array<{ id: string }> }).capabilities[0]!.id;
    expect(id).toBe("cap_duplicate_invoice_rule_v1_9");
    // Without the operator's key, a static capability is refused.
    const notAdmin = await cli("capability", "register", registry.url, "--file", "docs/examples/duplicate-invoice-rule.json");
    expect(notAdmin.code).toBe(1);
    expect(notAdmin.stderr).toContain("(permission_denied)");

    const rule = ["--next-step", "run_rule", "--domain", "reimbursement", "--scenario", "invoice_validation", "--intent", "explain", "--risk-signal", "duplicate_invoice"];
    // Listing permissions you were not granted adds nothing.
    const ungranted = await cli("capability", "match", registry.url, ...rule, "--permission", "reimbursement:read", "--permission", "risk:write");
    expect(ungranted.stdout).toContain("permissions counted: none");
    expect(ungranted.stdout).toContain("no capability matches");

    const me = await keyIdOf(env.SYNAPSE_HOME!);
    // The key id last, after "--": a random key's id begins with "-" one time in 64.
    const granted = await cli("permissions", "grant", registry.url, "--permission", "reimbursement:read", "--permission", "risk:write", "--reason", "risk analyst", "--home", ops, "--", me);
    expect(granted.code).toBe(0);
    expect(granted.stdout).toContain(`${me}  reimbursement:read, risk:write  (risk analyst)`);
    const mine = await cli("permissions", "list", registry.url, "--mine");
    expect(mine.stdout).toContain("reimbursement:read, risk:write");
    // A key id that begins with "-" (as one in 64 do), after "--".
    const dashed = `-${"A".repeat(42)}`;
    const dashGrant = await cli("permissions", "grant", registry.url, "--permission", "reimbursement:read", "--home", ops, "--", dashed);
    expect([dashGrant.code, dashGrant.stdout.includes(`${dashed}  reimbursement:read`)]).toEqual([0, true]);
    expect((await cli("permissions", "revoke", registry.url, "--home", ops, "--", dashed)).code).toBe(0);
    const selfGrant = await cli("permissions", "grant", registry.url, "--permission", "admin:all", "--", me);
    expect([selfGrant.code, selfGrant.stderr.includes("only a registry admin may")]).toEqual([1, true]);

    const matched = await cli("capability", "match", registry.url, ...rule);
    expect(matched.stdout).toContain("permissions counted: reimbursement:read, risk:write");
    expect(matched.stdout).toContain(`#1 ${id}`);
    expect(matched.stdout).toContain("step 1 next_step run_rule: rule capability");
    const narrowed = await cli("capability", "match", registry.url, "--domain", "reimbursement", "--permission", "reimbursement:read");
    expect(narrowed.stdout).toContain("no capability matches");
    const anonymous = await cli("capability", "match", registry.url, "--domain", "reimbursement", "--anonymous");
    expect(anonymous.stdout).toContain("no capability matches");

    // You hold permissions to use it, not to change it.
    const stranger = await cli("capability", "status", registry.url, id, "--status", "offline", "--reason", "under review");
    expect(stranger.code).toBe(1);
    expect(stranger.stderr).toMatch(/^synapse: \[permission_denied\] agent \S+ \(key \S+\) may not change capability cap_duplicate_invoice_rule_v1_9: it belongs to agent \S+ \(key \S+\); only its owner or a registry admin may \(permission_denied\)\n$/);

    const deprecated = await cli("capability", "status", registry.url, id, "--status", "deprecated", "--reason", "v2 under review", "--home", ops, "--json");
    expect(deprecated.code).toBe(0);
    const still = await cli("capability", "match", registry.url, ...rule);
    expect(still.stdout).toContain(`#1 ${id}`);
    expect(still.stdout).toContain("step 7 status: deprecated");

    const audit = await cli("audit", registry.url, "--capability", id);
    expect(audit.stdout).toContain("REFUSED SetCapabilityStatus cap_duplicate_invoice_rule_v1_9 CAPABILITY_STATUS_ACTIVE -> CAPABILITY_STATUS_OFFLINE");
    expect(audit.stdout).toContain("CAPABILITY_STATUS_ACTIVE -> CAPABILITY_STATUS_DEPRECATED (v2 under review)");

    const broken = await runCli(["capability", "register", registry.url, "--file", "-", "--home", ops], {
      env,
      input: JSON.stringify({ code: "x", name: "x", capability_type: "CAPABILITY_TYPE_SKILL", input_schema: "{}", output_schema: "{}", risk_level: "RISK_LEVEL_LOW", version: "1", status: "CAPABILITY_STATUS_ACTIVE" }),
    });
    expect(broken.code).toBe(1);
    expect(broken.stderr).toContain("owner");
  }, 90_000); // some twenty CLI runs, each a Node start

  it("refuses a --registry-admin that is not a key id", async () => {
    const refused = await runCli(["serve", "--port", "0", "--data-dir", await tempDir(), "--registry", "--registry-admin", "agent_one"]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("--registry-admin takes a key id");
  });

  it("lists the agents' task types in the catalogue", async () => {
    const matched = await cli("capability", "match", registry.url, "--domain", "data", "--intent", "analyze", "--json");
    const candidates = (JSON.parse(matched.stdout) as { candidates: Array<{ capability: { code: string; agentId: string } }> }).candidates;
    expect(candidates.map((c) => c.capability.code)).toEqual(["data_analysis", "data_analysis"]);
    expect(candidates.map((c) => c.capability.agentId).sort()).toEqual([first.agentId, second.agentId].sort());
  });
});

describe("names at a registry", () => {
  const named = async () => {
    const dataDir = await tempDir();
    const shown = JSON.parse((await runCli(["keygen", "--home", dataDir, "--agent-id", "billing-agent", "--json"])).stdout) as { agentId: string; publicKey: string };
    expect(shown.agentId).toBe("billing-agent");
    return { dataDir, publicKey: shown.publicKey };
  };

  it("refuses an agent that joins under a name nobody bound: serve exits 1 and says what to do", async () => {
    const agent = await named();
    const server = await startServe(["--data-dir", agent.dataDir, "--join", registry.url]);
    expect(await server.exited).toBe(1);
    expect(server.stderr()).toMatch(/^synapse: \[permission_denied\] agent billing-agent may not be registered with key \S+: .* Register as agent_[0-9a-f]{32} \(the id derived from this key\), or ask the registry's operator to bind billing-agent to this key \(permission_denied\)$/m);
    expect((await cli("agents", registry.url, "--json")).stdout).not.toContain("billing-agent");
  });

  it("lets the name join with the key the registry's trust store binds it to, and no other", async () => {
    const [owner, stranger] = [await named(), await named()];
    const trustStore = join(await tempDir(), "trust.json");
    await writeFile(trustStore, JSON.stringify({ agents: [{ agent_id: "billing-agent", public_key: owner.publicKey }] }));
    const bound = await startServe(["--data-dir", await tempDir(), "--registry", "--trust-store", trustStore, "--tofu"]);
    try {
      const squatter = await startServe(["--data-dir", stranger.dataDir, "--join", bound.url]);
      expect(await squatter.exited).toBe(1);
      expect(squatter.stderr()).toContain("agent billing-agent is bound to another key");
      const genuine = await startServe(["--data-dir", owner.dataDir, "--join", bound.url]);
      await joined(genuine);
      const found = JSON.parse((await cli("agents", bound.url, "--json")).stdout) as { agents: Array<{ capabilities: { agentId: string }; endpointUrl: string }> };
      expect(found.agents.map((a) => [a.capabilities.agentId, a.endpointUrl])).toEqual([["billing-agent", genuine.url]]);
      expect(await genuine.stop()).toBe(0);
    } finally {
      expect(await bound.stop()).toBe(0);
    }
  });

  it("gives a name to whoever joins first with --registry-open-names, which goes only with --registry", async () => {
    const [first, later] = [await named(), await named()];
    const open = await startServe(["--data-dir", await tempDir(), "--registry", "--registry-open-names"]);
    try {
      const early = await startServe(["--data-dir", first.dataDir, "--join", open.url]);
      await joined(early);
      const late = await startServe(["--data-dir", later.dataDir, "--join", open.url]);
      expect(await late.exited).toBe(1);
      expect(late.stderr()).toContain("(unknown_sender)");
      expect(await early.stop()).toBe(0);
    } finally {
      expect(await open.stop()).toBe(0);
    }
    const refused = await runCli(["serve", "--port", "0", "--data-dir", await tempDir(), "--registry-open-names"]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("--registry-open-names goes with --registry");
  });
});
