// `synapse capabilities URL`: what an agent is and can do.
import { durationMs } from "@bufbuild/protobuf/wkt";
import { createClient } from "@connectrpc/connect";
import { AgentCapabilitiesSchema, CapabilitiesService, Compliance, ImplementedInterfaceSchema, TransportMode } from "../../../gen/synapse/v1/capabilities_pb.js";
import { createTransport } from "../../client/transport.js";
import { transportOptions } from "../client.js";
import { parse, requirePositional } from "../args.js";
import { messageJson, printJson, printLine } from "../output.js";
import { counted } from "../../text/plural.js";

export const capabilitiesUsage = `usage: synapse capabilities URL [--protocol connect|grpc|grpc-web] [--ca FILE] [--json]

Prints the agent's capabilities (GetCapabilities), with each task type's
escalation policy, and implemented interfaces (GetSupportedInterfaces).`;

export async function capabilities(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { json: { type: "boolean" }, protocol: { type: "string" }, ca: { type: "string" } }, capabilitiesUsage);
  if (values.help) {
    printLine(capabilitiesUsage);
    return 0;
  }
  const url = requirePositional(positionals, 0, "URL", capabilitiesUsage);
  const client = createClient(CapabilitiesService, createTransport(url, transportOptions(values)));
  const [{ capabilities: caps }, { interfaces }] = await Promise.all([client.getCapabilities({}), client.getSupportedInterfaces({})]);
  if (caps === undefined) throw new Error("the server sent no capabilities");
  if (values.json) {
    printJson({
      capabilities: messageJson(AgentCapabilitiesSchema, caps),
      interfaces: interfaces.map((entry) => messageJson(ImplementedInterfaceSchema, entry)),
    });
    return 0;
  }
  printLine(`${caps.agentName} (${caps.agentId}) in system ${caps.systemId || "-"}`);
  printLine(`protocol ${caps.protocolVersion}, key ${caps.keyId}`);
  printLine(
    `limits: ${counted(caps.maxConcurrentTasks, "concurrent task")}, ${caps.maxTaskDurationSeconds} s per task, ${counted(caps.maxFileSize, "byte")} per message`,
  );
  const flags = [
    caps.supportProgressUpdates && "progress updates",
    caps.supportStreaming && "streaming",
    caps.supportHil && "human in the loop",
    caps.supportGroups && "groups",
  ].filter(Boolean);
  printLine(`supports: ${flags.join(", ") || "-"}`);
  printLine(`transport modes: ${caps.supportedTransportModes.map((mode) => TransportMode[mode].toLowerCase()).join(", ")}`);
  printLine("task types:");
  for (const taskType of caps.supportedTaskTypes) {
    printLine(`  ${taskType.type.padEnd(18)}${taskType.name} (${taskType.estimatedTime})`);
    const levels = taskType.escalation?.levels ?? [];
    // Who decides a human decision at each level, and how long each waits.
    if (levels.length > 0) {
      const described = levels.map((level, index) => {
        const who = [...(level.requester ? ["requester"] : []), ...level.agentIds].join(", ");
        return `${index + 1}: ${who}${level.timeout ? ` (${durationMs(level.timeout) / 1000} s)` : ""}`;
      });
      printLine(`    escalation ${described.join("; ")}`);
    }
  }
  printLine("interfaces:");
  for (const entry of interfaces) printLine(`  ${entry.name.padEnd(22)}${Compliance[entry.complianceLevel].toLowerCase().padEnd(10)}${entry.version}`);
  return 0;
}
