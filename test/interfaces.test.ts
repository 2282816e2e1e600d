// What the reference agent declares of the 18 standard interfaces, each
// with what provides it, and the level a registry's EvaluateCompliance
// gives it (through RPC and `synapse compliance --agent`): `synapse serve`
// declares all 18 and is rated ADVANCED. The claims rest on what is served:
// StreamingTransport on the SSE path, MultipartTransport on POST /upload,
// EscalationHandler on the task types' policies, the group interfaces on
// GroupService (each exercised in its own test file).
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CapabilitiesService, Compliance } from "../gen/synapse/v1/capabilities_pb.js";
import { RegistryService } from "../gen/synapse/v1/registry_pb.js";
import { STANDARD_INTERFACES } from "../src/capabilities/interfaces.js";
import { runCli, startServe, type ServeProcess } from "./helpers/cli.js";
import { SERVED_INTERFACES, SERVED_LEVEL } from "./helpers/interfaces.js";
import { tempDir } from "./helpers/server.js";

describe("the reference agent's standard interfaces", () => {
  let registry: ServeProcess;
  let agent: ServeProcess;

  beforeAll(async () => {
    registry = await startServe(["--data-dir", await tempDir(), "--registry"]);
    agent = await startServe(["--data-dir", await tempDir(), "--join", registry.url]);
    for (let i = 0; i < 200 && !agent.stdout().includes("joined registry"); i++) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(agent.stdout()).toContain("joined registry");
  });
  afterAll(async () => {
    expect(await agent?.stop()).toBe(0);
    expect(await registry?.stop()).toBe(0);
  });

  it("declares all 18, each with what provides it", async () => {
    const { interfaces } = await createClient(CapabilitiesService, createGrpcTransport({ baseUrl: agent.url })).getSupportedInterfaces({});
    const names = interfaces.map((entry) => entry.name);
    expect(names).toEqual(SERVED_INTERFACES);
    expect(names).toHaveLength(18);
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
    expect(provider("GroupManager").join(" ")).toContain("synapse.v1.GroupService/WatchGroup");
    expect(provider("VotingHandler").join(" ")).toContain("synapse.v1.GroupService/Tally");
  });

  it("is rated at the top level by EvaluateCompliance, over RPC and from the command line", async () => {
    const rpc = createClient(RegistryService, createGrpcTransport({ baseUrl: registry.url }));
    const { evaluation, complianceLevel } = await rpc.evaluateCompliance({ agentId: agent.agentId });
    expect(complianceLevel).toBe(Compliance.ADVANCED);
    expect(complianceLevel).toBe(SERVED_LEVEL);
    expect(evaluation).toMatchObject({ basicImplemented: 8, completeImplemented: 5, advancedImplemented: 5, compliant: true, missingBasics: [] });

    const printed = await runCli(["compliance", registry.url, "--agent", agent.agentId]);
    expect(printed.code).toBe(0);
    expect(printed.stdout).toContain("compliant (advanced)");
    expect(printed.stdout).toContain("basic 8/8, complete 5/5, advanced 5/5");
  });
});
