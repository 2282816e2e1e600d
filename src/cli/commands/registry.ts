// The registry from the command line: `synapse agents`, `synapse compliance`,
// `synapse capability register|get|list|status|match` and `synapse audit`.
import { fromJson, toJson, type JsonValue } from "@bufbuild/protobuf";
import { createClient, type Client } from "@connectrpc/connect";
import { readFile } from "node:fs/promises";
import { CapabilitiesService, Compliance, TransportMode } from "../../../gen/synapse/v1/capabilities_pb.js";
import {
  AgentHealth,
  AuditEventKind,
  AuditEventSchema,
  CapabilityHealth,
  CapabilityMatchSchema,
  CapabilityStatus,
  EvaluateComplianceResponseSchema,
  GovernedCapabilitySchema,
  RegisteredAgentSchema,
  RegistryService,
  type GovernedCapability,
} from "../../../gen/synapse/v1/registry_pb.js";
import { loadOrCreateIdentity } from "../../agent/identity.js";
import { createTransport } from "../../client/transport.js";
import { issueToken } from "../../crypto/tokens.js";
import { integerOption, parse, requirePositional, UsageError } from "../args.js";
import { clientOptions, transportOptions, type CallValues } from "../client.js";
import { synapseHome } from "../home.js";
import { printJson, printLine } from "../output.js";

export const agentsUsage = `usage: synapse agents REGISTRY_URL [--task-type T] [--capability TAG] [--content-type MIME]
                      [--transport-mode callback|polling|sync|hybrid] [--interface NAME]
                      [--min-compliance basic|complete|advanced] [--all] [--page-size N] [--json]

Finds registered agents (FindAgents), healthy first; --all includes unhealthy ones.`;

export const complianceUsage = `usage: synapse compliance REGISTRY_URL (--interface NAME ... | --agent AGENT_ID) [--json]

Evaluates interfaces against the 18 standard interfaces (EvaluateCompliance).`;

export const capabilityUsage = `usage: synapse capability register REGISTRY_URL --file FILE|-      (a GovernedCapability as JSON)
       synapse capability get      REGISTRY_URL ID
       synapse capability list     REGISTRY_URL [--domain D] [--code C] [--status S ...]
       synapse capability status   REGISTRY_URL ID --status active|inactive|offline|deprecated [--reason R] [--health healthy|degraded|unhealthy]
       synapse capability match    REGISTRY_URL [--next-step S] [--domain D] [--scenario S] [--intent I]
                                   [--risk-signal X ...] [--permission P ...] [--limit N] [--anonymous]
Every form takes --json. register, status and match use your key (a bearer token is made from SYNAPSE_HOME).
Only a capability's owner (the identity that registered it) or a registry admin key may
register versions of it or change its status; capabilities without agent_id are added by admins.
match counts the permissions the registry grants your key (see \`synapse permissions\`);
--permission narrows them, it never adds one; --anonymous matches as nobody (no permissions).`;

export const auditUsage = `usage: synapse audit REGISTRY_URL [--capability ID] [--page-size N] [--json]

The catalogue's audit trail (who changed which version or status, when, from, to).`;

export function registry(url: string, values: CallValues): Client<typeof RegistryService> {
  return createClient(RegistryService, createTransport(url, transportOptions(values)));
}

function enumValue<E extends Record<string, string | number>>(enumObject: E, prefix: string, name: string, what: string): E[keyof E] {
  const key = name.trim().toUpperCase().replace(new RegExp(`^${prefix}`), "");
  const value = enumObject[key as keyof E];
  if (typeof value !== "number" || value === 0) throw new UsageError(`unknown ${what} ${JSON.stringify(name)}`);
  return value as E[keyof E];
}

/** A bearer token for the registry, made with the user's key. */
export async function writeHeaders(url: string, values: CallValues & { home?: string }): Promise<Record<string, string>> {
  const { identity } = await loadOrCreateIdentity(synapseHome(values.home), { agentName: "synapse command line" });
  const registryAgent = (await createClient(CapabilitiesService, createTransport(url, transportOptions(values))).getCapabilities({})).capabilities;
  const token = await issueToken(identity.key, { agentId: identity.agentId, audience: registryAgent?.agentId ?? "" });
  return { Authorization: `Bearer ${token}` };
}

const lower = (name: string | undefined) => (name ?? "").toLowerCase();
const levelName = (level: Compliance) => (level === Compliance.UNSPECIFIED ? "below basic" : lower(Compliance[level]));

function describeCapability(capability: GovernedCapability): string {
  const by = capability.ownerAgentId || capability.agentId;
  return `${capability.id}  ${capability.code} ${capability.version}  ${lower(CapabilityStatus[capability.status])}  ${capability.domain || "-"}  owner ${capability.owner}${by ? `  registered by ${by}` : ""}`;
}

export async function agents(argv: string[]): Promise<number> {
  const { values, positionals } = parse(
    argv,
    {
      ...clientOptions,
      "task-type": { type: "string" },
      capability: { type: "string" },
      "content-type": { type: "string" },
      "transport-mode": { type: "string" },
      interface: { type: "string" },
      "min-compliance": { type: "string" },
      all: { type: "boolean" },
      "page-size": { type: "string" },
    },
    agentsUsage,
  );
  if (values.help) {
    printLine(agentsUsage);
    return 0;
  }
  const url = requirePositional(positionals, 0, "REGISTRY_URL", agentsUsage);
  const page = await registry(url, values).findAgents({
    taskType: values["task-type"] ?? "",
    capability: values.capability ?? "",
    contentType: values["content-type"] ?? "",
    transportMode: values["transport-mode"] ? enumValue(TransportMode, "TRANSPORT_MODE_", values["transport-mode"], "transport mode") : TransportMode.UNSPECIFIED,
    interface: values.interface ?? "",
    minCompliance: values["min-compliance"] ? enumValue(Compliance, "COMPLIANCE_", values["min-compliance"], "compliance level") : Compliance.UNSPECIFIED,
    includeUnhealthy: Boolean(values.all),
    pageSize: integerOption(values["page-size"], "--page-size") ?? 0,
  });
  if (values.json) {
    printJson({ agents: page.agents.map((agent) => toJson(RegisteredAgentSchema, agent)), nextPageToken: page.nextPageToken });
    return 0;
  }
  for (const agent of page.agents) {
    const caps = agent.capabilities!;
    printLine(`${caps.agentId}  ${agent.endpointUrl}  ${lower(AgentHealth[agent.health])}  ${levelName(agent.complianceLevel)}  ${caps.supportedTaskTypes.map((t) => t.type).join(",")}`);
  }
  if (page.agents.length === 0) printLine("no agents match");
  return 0;
}

export async function compliance(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...clientOptions, interface: { type: "string", multiple: true }, agent: { type: "string" } }, complianceUsage);
  if (values.help) {
    printLine(complianceUsage);
    return 0;
  }
  const url = requirePositional(positionals, 0, "REGISTRY_URL", complianceUsage);
  if (!values.interface?.length && !values.agent) throw new UsageError(`give --interface names or --agent\n\n${complianceUsage}`);
  const result = await registry(url, values).evaluateCompliance({
    interfaces: (values.interface ?? []).flatMap((list) => list.split(",")).map((name) => ({ name: name.trim() })),
    agentId: values.agent ?? "",
  });
  if (values.json) {
    printJson(toJson(EvaluateComplianceResponseSchema, result));
    return 0;
  }
  const e = result.evaluation!;
  printLine(`${e.compliant ? "compliant" : "not compliant"} (${levelName(result.complianceLevel)})`);
  printLine(`basic ${e.basicImplemented}/${e.basicRequired}, complete ${e.completeImplemented}/${e.completeTotal}, advanced ${e.advancedImplemented}/${e.advancedTotal}`);
  if (e.missingBasics.length) printLine(`missing basic interfaces: ${e.missingBasics.join(", ")}`);
  if (result.unknownInterfaces.length) printLine(`not standard interfaces: ${result.unknownInterfaces.join(", ")}`);
  return e.compliant ? 0 : 1;
}

async function readCapability(file: string): Promise<GovernedCapability> {
  const text = file === "-" ? await new Promise<string>((resolve) => {
    let data = "";
    process.stdin.on("data", (chunk: Buffer) => (data += chunk.toString()));
    process.stdin.on("end", () => resolve(data));
  }) : await readFile(file, "utf8");
  try {
    const json = JSON.parse(text) as JsonValue;
    const body = typeof json === "object" && json !== null && !Array.isArray(json) && "capability" in json ? (json.capability as JsonValue) : json;
    return fromJson(GovernedCapabilitySchema, body);
  } catch (error) {
    throw new UsageError(`${file} is not a GovernedCapability as JSON: ${(error as Error).message}`);
  }
}

export async function capability(argv: string[]): Promise<number> {
  const [verb, ...rest] = argv;
  const { values, positionals } = parse(
    rest,
    {
      ...clientOptions,
      file: { type: "string" },
      domain: { type: "string" },
      code: { type: "string" },
      status: { type: "string", multiple: true },
      reason: { type: "string" },
      health: { type: "string" },
      "next-step": { type: "string" },
      scenario: { type: "string" },
      intent: { type: "string" },
      "risk-signal": { type: "string", multiple: true },
      permission: { type: "string", multiple: true },
      limit: { type: "string" },
      anonymous: { type: "boolean" },
    },
    capabilityUsage,
  );
  if (values.help || verb === undefined || verb === "--help") {
    printLine(capabilityUsage);
    return verb === undefined ? 2 : 0;
  }
  const url = requirePositional(positionals, 0, "REGISTRY_URL", capabilityUsage);
  const client = registry(url, values);
  const status = (name: string) => enumValue(CapabilityStatus, "CAPABILITY_STATUS_", name, "status");
  const show = (capabilities: GovernedCapability[]) => {
    if (values.json) printJson({ capabilities: capabilities.map((c) => toJson(GovernedCapabilitySchema, c)) });
    else for (const c of capabilities) printLine(describeCapability(c));
  };
  switch (verb) {
    case "register": {
      if (!values.file) throw new UsageError(`--file is required\n\n${capabilityUsage}`);
      const { capability: stored } = await client.registerCapability({ capability: await readCapability(values.file) }, { headers: await writeHeaders(url, values) });
      show([stored!]);
      return 0;
    }
    case "get": {
      const id = requirePositional(positionals, 1, "ID", capabilityUsage);
      show([(await client.getCapability({ id })).capability!]);
      return 0;
    }
    case "list": {
      const page = await client.listCapabilities({ domain: values.domain ?? "", code: values.code ?? "", statuses: (values.status ?? []).map(status) });
      show(page.capabilities);
      return 0;
    }
    case "status": {
      const id = requirePositional(positionals, 1, "ID", capabilityUsage);
      if (values.status?.length !== 1) throw new UsageError(`give one --status\n\n${capabilityUsage}`);
      const health = values.health ? enumValue(CapabilityHealth, "CAPABILITY_HEALTH_", values.health, "health") : CapabilityHealth.UNSPECIFIED;
      const { capability: changed } = await client.setCapabilityStatus(
        { id, status: status(values.status[0]!), reason: values.reason ?? "", health },
        { headers: await writeHeaders(url, values) },
      );
      show([changed!]);
      return 0;
    }
    case "match": {
      const { candidates, permissionsApplied } = await client.matchCapabilities(
        {
          ontology: { nextStep: values["next-step"] ?? "", domain: values.domain ?? "", scenario: values.scenario ?? "", intent: values.intent ?? "", riskSignals: values["risk-signal"] ?? [] },
          permissions: values.permission ?? [],
          limit: integerOption(values.limit, "--limit") ?? 0,
        },
        values.anonymous ? {} : { headers: await writeHeaders(url, values) },
      );
      if (values.json) {
        printJson({ candidates: candidates.map((c) => toJson(CapabilityMatchSchema, c)), permissionsApplied });
        return 0;
      }
      printLine(`permissions counted: ${permissionsApplied.length > 0 ? permissionsApplied.join(", ") : "none"}`);
      for (const candidate of candidates) {
        printLine(`#${candidate.rank} ${describeCapability(candidate.capability!)}  score ${candidate.score}`);
        for (const reason of candidate.reasons) printLine(`    ${reason}`);
      }
      if (candidates.length === 0) printLine("no capability matches");
      return 0;
    }
    default:
      throw new UsageError(`unknown capability command ${JSON.stringify(verb)}\n\n${capabilityUsage}`);
  }
}

export async function audit(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...clientOptions, capability: { type: "string" }, "page-size": { type: "string" } }, auditUsage);
  if (values.help) {
    printLine(auditUsage);
    return 0;
  }
  const url = requirePositional(positionals, 0, "REGISTRY_URL", auditUsage);
  const page = await registry(url, values).listAuditEvents({ capabilityId: values.capability ?? "", pageSize: integerOption(values["page-size"], "--page-size") ?? 0 });
  if (values.json) {
    printJson({ events: page.events.map((e) => toJson(AuditEventSchema, e)), nextPageToken: page.nextPageToken });
    return 0;
  }
  for (const event of page.events) {
    const at = event.at ? new Date(Number(event.at.seconds) * 1000).toISOString() : "";
    const what =
      event.kind === AuditEventKind.REFUSED
        ? `REFUSED ${event.action} ${event.capabilityId || `grant of ${event.granteeKeyId}`}`
        : event.kind === AuditEventKind.GRANT_CHANGED
          ? `grant of ${event.granteeKeyId}`
          : event.capabilityId;
    printLine(`${event.id} ${at} ${event.actor}: ${what} ${event.from || "-"} -> ${event.to || "-"}${event.reason ? ` (${event.reason})` : ""}`);
  }
  return 0;
}
