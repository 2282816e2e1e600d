// What the reference agent declares of the 18 standard interfaces, each
// with what provides it, and the level a registry's EvaluateCompliance
// gives it (through RPC and `synapse compliance --agent`). With the group
// work wired that is all 18 and the top level, ADVANCED; until then the 15
// others and COMPLETE. The claims rest on what is served: StreamingTransport
// on the SSE path, MultipartTransport on POST /upload, EscalationHandler on
// the task types' policies (each exercised in its own test file).
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CapabilitiesService, Compliance } from "../gen/synapse/v1/capabilities_pb.js";
import { RegistryService } from "../gen/synapse/v1/registry_pb.js";
import { STANDARD_INTERFACES } from "../src/capabilities/interfaces.js";
import { silentLogger } from "../src/log.js";
import { joinRegistry, type Membership } from "../src/registry/join.js";
import { runCli } from "./helpers/cli.js";
import { AGENT_INTERFACES, AGENT_LEVEL, GROUP_INTERFACES, groupsWired } from "./helpers/interfaces.js";
import { startTestServer, type TestServer } from "./helpers/server.js";

describe("the reference agent's standard interfaces", () => {
  let registry: TestServer;
  let agent: TestServer;
  let membership: Membership;

  beforeAll(async () => {
    registry = await startTestServer({ registry: {} });
    agent = await startTestServer();
    membership = await joinRegistry({ registryUrl: registry.url, identity: agent.agent.identity, provider: agent.agent.provider, endpointUrl: agent.url, logger: silentLogger });
  });
  afterAll(async () => {
    await membership?.leave();
    await agent?.close();
    await registry?.close();
  });

  it("declares each one with what provides it", async () => {
    const { interfaces } = await createClient(CapabilitiesService, createGrpcTransport({ baseUrl: agent.url })).getSupportedInterfaces({});
    const names = interfaces.map((entry) => entry.name);
    expect(names).toEqual(AGENT_INTERFACES);
    if (groupsWired) expect(names).toHaveLength(18);
    else expect(STANDARD_INTERFACES.map((entry) => entry.name).filter((name) => !names.includes(name))).toEqual([...GROUP_INTERFACES]);
    for (const entry of interfaces) {
      const standard = STANDARD_INTERFACES.find((known) => known.name === entry.name)!;
      expect(entry).toMatchObject({ category: standard.category, complianceLevel: standard.level, version: "1.0.0" });
      const providedBy = entry.metadata?.provided_by as string[] | undefined;
      expect(providedBy?.length, entry.name).toBeGreaterThan(0);
    }
    const provider = (name: string) => interfaces.find((entry) => entry.name === name)?.metadata?.provided_by as string[];
    // The specification names SSE or WebSocket for streaming: the claim rests on the SSE path.
    expect(provider("StreamingTransport")[0]).toBe("GET /tasks/{task_id}/events (Server-Sent Events)");
    expect(provider("MultipartTransport")).toContain("POST /upload (multipart/form-data)");
    expect(provider("EscalationHandler")).toContain("SupportedTaskType.escalation");
  });

  it("is rated at the top level it reaches by EvaluateCompliance, over RPC and from the command line", async () => {
    const rpc = createClient(RegistryService, createGrpcTransport({ baseUrl: registry.url }));
    const { evaluation, complianceLevel } = await rpc.evaluateCompliance({ agentId: agent.agent.identity.agentId });
    expect(complianceLevel).toBe(AGENT_LEVEL);
    expect(evaluation).toMatchObject({ basicImplemented: 8, completeImplemented: 5, advancedImplemented: groupsWired ? 5 : 2, compliant: true, missingBasics: [] });
    if (groupsWired) expect(complianceLevel).toBe(Compliance.ADVANCED);

    const printed = await runCli(["compliance", registry.url, "--agent", agent.agent.identity.agentId]);
    expect(printed.code).toBe(0);
    expect(printed.stdout).toContain(`compliant (${Compliance[AGENT_LEVEL].toLowerCase()})`);
    expect(printed.stdout).toContain(`basic 8/8, complete 5/5, advanced ${groupsWired ? 5 : 2}/5`);
  });
});
