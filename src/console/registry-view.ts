// The registry this server hosts (RegistryService, public reads): the agents
// registered, with the health of their leases and their compliance; the
// governed capability catalogue, every version of each capability with its
// status and health; and the audit trail of who changed what, when and why.
import { Compliance, RiskLevel } from "../../gen/synapse/v1/capabilities_pb.js";
import { AgentHealth, AuditEventKind, CapabilityHealth, CapabilityStatus, type AuditEvent, type GovernedCapability, type RegisteredAgent } from "../../gen/synapse/v1/registry_pb.js";
import { clockTime, countdown, msOf, relative } from "./format.js";
import { describeError, registryService } from "./rpc.js";
import { button, el, idCode, note, show } from "./view.js";

const REFRESH_MS = 10_000;

/** An enum value's name without its prefix, lower case: "healthy", "active". */
function word(names: Record<number, string>, value: number, prefix: string): string {
  return (names[value] ?? String(value)).replace(prefix, "").toLowerCase();
}

function badge(text: string, tone: string, attributes: Record<string, string> = {}): HTMLElement {
  return el("span", { class: `badge tone-${tone}`, ...attributes }, text.replace(/_/g, " "));
}

function table(caption: string, headings: string[], body: HTMLTableSectionElement, testId: string): HTMLTableElement {
  return el(
    "table",
    { "data-testid": testId },
    el("caption", {}, caption),
    el("thead", {}, el("tr", {}, ...headings.map((name) => el("th", { scope: "col" }, name)))),
    body,
  );
}

function agentRow(agent: RegisteredAgent): HTMLTableRowElement {
  const capabilities = agent.capabilities;
  const health = word(AgentHealth, agent.health, "AGENT_HEALTH_");
  const lease = msOf(agent.leaseExpiresAt);
  const compliance = agent.compliance;
  const level = word(Compliance, agent.complianceLevel, "COMPLIANCE_");
  return el(
    "tr",
    { "data-testid": "registry-agent", "data-agent-id": capabilities?.agentId ?? "", "data-health": health },
    el("td", {}, el("strong", {}, capabilities?.agentName ?? ""), el("br"), el("code", {}, capabilities?.agentId ?? "")),
    el("td", {}, el("code", {}, agent.endpointUrl)),
    el("td", {}, badge(health, health === "healthy" ? "done" : "failed")),
    el("td", { title: clockTime(lease) }, lease === undefined ? "—" : lease > Date.now() ? `${countdown(lease)} left` : `expired ${relative(lease)}`),
    el("td", {}, relative(msOf(agent.lastHeartbeatAt))),
    el(
      "td",
      { "data-testid": "compliance", "data-level": level },
      badge(level === "unspecified" ? "below basic" : level, compliance?.compliant ? "done" : "failed"),
      compliance
        ? el(
            "small",
            {},
            ` basic ${compliance.basicImplemented}/${compliance.basicRequired} · complete ${compliance.completeImplemented}/${compliance.completeTotal} · advanced ${compliance.advancedImplemented}/${compliance.advancedTotal}`,
            compliance.missingBasics.length > 0 ? ` · missing ${compliance.missingBasics.join(", ")}` : "",
          )
        : "",
    ),
    el("td", {}, (capabilities?.supportedTaskTypes ?? []).map((taskType) => taskType.type).join(", ")),
  );
}

/** "inactive" for "CAPABILITY_STATUS_INACTIVE"; versions and other values as they are. */
function statusWord(value: string): string {
  return value.startsWith("CAPABILITY_STATUS_") ? value.slice("CAPABILITY_STATUS_".length).toLowerCase() : value;
}

function auditRow(event: AuditEvent): HTMLTableRowElement {
  const kind = word(AuditEventKind, event.kind, "AUDIT_EVENT_KIND_");
  return el(
    "tr",
    { "data-testid": "audit-event", "data-kind": kind },
    el("td", {}, clockTime(msOf(event.at))),
    el("td", {}, badge(kind, kind === "refused" ? "failed" : "working")),
    el("td", {}, el("code", { title: event.capabilityId }, event.capabilityCode || event.granteeKeyId)),
    el("td", {}, event.actor, event.actorKeyId ? el("small", {}, " (", idCode(event.actorKeyId), ")") : ""),
    el("td", {}, event.action),
    el("td", {}, event.from || event.to ? `${statusWord(event.from) || "—"} → ${statusWord(event.to) || "—"}` : ""),
    el("td", {}, event.reason),
  );
}

export class RegistryView {
  private readonly agents = el("tbody", {});
  private readonly capabilities = el("tbody", {});
  private readonly audit = el("tbody", {});
  private readonly auditTitle = el("h3", { "data-testid": "audit-title" }, "Audit trail");
  private readonly status = el("p", { class: "note", role: "status", "data-testid": "registry-status" });
  private readonly allAudit = button("Every capability's", () => void this.showAudit(""), { "data-testid": "audit-all", hidden: "" });
  /** The capability whose audit trail is shown, or "" for all. */
  private auditOf = "";
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(private readonly container: HTMLElement) {
    show(
      container,
      el("div", { class: "toolbar" }, el("h2", {}, "Registry"), button("Refresh", () => void this.read(), { "data-testid": "refresh-registry" })),
      el("section", { "aria-label": "Agents" }, table("Registered agents: health follows each lease", ["Agent", "Endpoint", "Health", "Lease", "Last heartbeat", "Compliance", "Task types"], this.agents, "registry-agents")),
      el(
        "section",
        { "aria-label": "Capability catalogue" },
        table("Capability catalogue: every version, with its status and health", ["Capability", "Version", "Status", "Health", "Risk", "Provided by", "Owner", ""], this.capabilities, "registry-capabilities"),
      ),
      el("section", { "aria-label": "Audit trail" }, el("div", { class: "toolbar" }, this.auditTitle, this.allAudit), table("Newest first", ["When", "Event", "Capability", "Actor", "Action", "From → to", "Why"], this.audit, "registry-audit")),
      this.status,
    );
  }

  start(): void {
    void this.read();
    this.timer ??= setInterval(() => {
      if (this.container.offsetParent !== null) void this.read();
    }, REFRESH_MS);
  }

  async read(): Promise<void> {
    try {
      const [agents, catalogue] = await Promise.all([registryService.findAgents({ includeUnhealthy: true, pageSize: 200 }), registryService.listCapabilities({ pageSize: 500 })]);
      show(this.agents, ...(agents.agents.length > 0 ? agents.agents.map(agentRow) : [el("tr", {}, el("td", { colspan: "7" }, note("No agent is registered.")))]));
      this.showCatalogue(catalogue.capabilities);
      await this.readAudit();
      this.status.className = "note";
      this.status.textContent = `read ${clockTime(Date.now())}`;
    } catch (error) {
      this.status.className = "bad";
      this.status.textContent = `✗ ${describeError(error)}`;
    }
  }

  private showCatalogue(capabilities: GovernedCapability[]): void {
    const rows: HTMLTableRowElement[] = [];
    let lineage = "";
    for (const capability of capabilities) {
      const key = `${capability.code}\u0000${capability.agentId}`;
      if (key !== lineage) {
        lineage = key;
        const versions = capabilities.filter((other) => other.code === capability.code && other.agentId === capability.agentId).length;
        rows.push(el("tr", { class: "group" }, el("th", { colspan: "8", scope: "rowgroup" }, el("code", {}, capability.code), ` ${capability.name} · ${versions} version${versions === 1 ? "" : "s"}`)));
      }
      const status = word(CapabilityStatus, capability.status, "CAPABILITY_STATUS_");
      const health = word(CapabilityHealth, capability.health, "CAPABILITY_HEALTH_");
      rows.push(
        el(
          "tr",
          { "data-testid": "registry-capability", "data-capability-id": capability.id, "data-status": status, "data-health": health },
          el("td", {}, el("code", { title: capability.id }, capability.id)),
          el("td", {}, capability.version),
          el("td", {}, badge(status, status === "active" ? "done" : status === "deprecated" ? "waiting" : "stopped")),
          el("td", {}, badge(health === "unspecified" ? "not reported" : health, health === "unhealthy" ? "failed" : health === "degraded" ? "waiting" : health === "healthy" ? "done" : "stopped")),
          el("td", {}, word(RiskLevel, capability.riskLevel, "RISK_LEVEL_")),
          el("td", {}, capability.agentId ? el("code", {}, capability.agentId) : "static"),
          el("td", {}, capability.owner),
          el("td", {}, button("Audit trail", () => void this.showAudit(capability.id), { "data-testid": "show-audit", "aria-label": `Audit trail of ${capability.id}` })),
        ),
      );
    }
    show(this.capabilities, ...(rows.length > 0 ? rows : [el("tr", {}, el("td", { colspan: "8" }, note("The catalogue is empty.")))]));
  }

  private async showAudit(capabilityId: string): Promise<void> {
    this.auditOf = capabilityId;
    await this.readAudit().catch((error: unknown) => {
      this.status.className = "bad";
      this.status.textContent = `✗ ${describeError(error)}`;
    });
    this.auditTitle.focus();
  }

  private async readAudit(): Promise<void> {
    const { events } = await registryService.listAuditEvents({ capabilityId: this.auditOf, pageSize: 1000 });
    this.auditTitle.textContent = this.auditOf ? `Audit trail of ${this.auditOf}` : "Audit trail";
    this.allAudit.hidden = this.auditOf === "";
    this.auditTitle.tabIndex = -1;
    const rows = [...events].reverse().map(auditRow);
    show(this.audit, ...(rows.length > 0 ? rows : [el("tr", {}, el("td", { colspan: "7" }, note("No audit events.")))]));
  }
}
