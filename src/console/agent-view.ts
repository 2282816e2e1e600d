// The agent this console talks to, as GetCapabilities declares it: name,
// ids, the key its events are verified with, limits, and the task types it
// runs.
import type { AgentCapabilities } from "../../gen/synapse/v1/capabilities_pb.js";
import { toBase64Url } from "./bytes.js";
import { el, formatBytes, show } from "./view.js";

export function agentView(container: HTMLElement, capabilities: AgentCapabilities, hostsRegistry: boolean): void {
  show(
    container,
    el("h2", {}, "Agent"),
    el(
      "dl",
      { class: "facts" },
      el("dt", {}, "Name"),
      el("dd", { "data-testid": "agent-name" }, capabilities.agentName),
      el("dt", {}, "Agent id"),
      el("dd", {}, el("code", { "data-testid": "agent-id" }, capabilities.agentId)),
      el("dt", {}, "Key id"),
      el("dd", {}, el("code", { "data-testid": "agent-key-id" }, capabilities.keyId), " ", el("span", { class: "ok", "data-testid": "agent-key-check" }, "✓ matches its public key")),
      el("dt", {}, "Public key"),
      el("dd", {}, el("code", {}, toBase64Url(capabilities.publicKey)), el("small", {}, " (every event is verified against it)")),
      el("dt", {}, "Protocol version"),
      el("dd", { "data-testid": "protocol-version" }, capabilities.protocolVersion),
      el("dt", {}, "Max file size"),
      el("dd", { "data-testid": "max-file-size" }, formatBytes(capabilities.maxFileSize)),
      el("dt", {}, "Concurrent tasks"),
      el("dd", { "data-testid": "max-concurrent-tasks" }, String(capabilities.maxConcurrentTasks)),
      el("dt", {}, "Max task duration"),
      el("dd", { "data-testid": "max-task-duration" }, `${capabilities.maxTaskDurationSeconds} s`),
      el("dt", {}, "Registry"),
      el("dd", { "data-testid": "agent-registry" }, hostsRegistry ? "hosted here" : "not hosted here"),
    ),
    el("h3", {}, "Task types"),
    el(
      "ul",
      { class: "task-types", "data-testid": "task-types" },
      ...capabilities.supportedTaskTypes.map((taskType) =>
        el("li", { "data-task-type": taskType.type }, el("code", {}, taskType.type), ` ${taskType.name}: ${taskType.description}`),
      ),
    ),
  );
}
