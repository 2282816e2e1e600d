// Submitting a task: a task type the agent offers (GetCapabilities), its
// payload as JSON (started from the type's input schema), optionally asking
// for a human approval first; sealed and signed in the browser and sent with
// P2PService.Send. The new task opens on its own page. A confidential one
// (docs/PROTOCOL.md §9) is sealed to the executor's encryption key, checked
// against its identity key first.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { SupportedTaskType } from "../../gen/synapse/v1/capabilities_pb.js";
import { describeError, type Session } from "./rpc.js";
import { replyLine, submitTask } from "./steering.js";
import type { TaskModel } from "./task-model.js";
import { el, show } from "./view.js";

interface SchemaProperty {
  type?: string;
  minimum?: number;
  description?: string;
}

/** Example values for properties the reference task types name. */
const EXAMPLES: Record<string, JsonValue> = {
  text: "Agents talk to each other. Every message they send is signed. A console shows what they said.",
  csv: "city,temperature\nOslo,4\nLisbon,18\nCairo,27\n",
};

function schemaOf(taskType: SupportedTaskType): { properties: Record<string, SchemaProperty>; required: string[] } {
  try {
    const parsed = JSON.parse(taskType.inputSchema || "{}") as { properties?: Record<string, SchemaProperty>; required?: string[] };
    return { properties: parsed.properties ?? {}, required: parsed.required ?? [] };
  } catch {
    return { properties: {}, required: [] };
  }
}

/** A payload with every required property filled in, as a place to start. */
export function examplePayload(taskType: SupportedTaskType): JsonObject {
  const { properties, required } = schemaOf(taskType);
  const payload: JsonObject = {};
  for (const name of required) {
    const property = properties[name] ?? {};
    payload[name] =
      EXAMPLES[name] ??
      (property.type === "integer" || property.type === "number" ? (property.minimum ?? 1) : property.type === "boolean" ? false : property.type === "array" ? [] : property.type === "object" ? {} : "");
  }
  return payload;
}

function parsePayload(text: string): JsonObject {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new Error(`the payload is not JSON: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new Error("the payload must be a JSON object");
  return value as JsonObject;
}

export function submitView(container: HTMLElement, session: Session, model: TaskModel, submitted: (taskId: string) => void): void {
  const types = session.capabilities.supportedTaskTypes;
  const select = el("select", { id: "task-type", name: "task-type", "data-testid": "task-type" });
  for (const taskType of types) select.append(el("option", { value: taskType.type }, `${taskType.type} · ${taskType.name}`));
  const description = el("p", { class: "note", id: "task-type-description", "data-testid": "task-type-description" });
  const textarea = el("textarea", { id: "task-payload", name: "task-payload", "data-testid": "task-payload", rows: "8", spellcheck: "false", "aria-describedby": "task-type-description" });
  const approval = el("input", { id: "require-approval", type: "checkbox", "data-testid": "require-approval" });
  const approvalRow = el("div", { class: "check" }, approval, el("label", { for: approval.id }, "Ask a person to approve it before it runs (require_approval)"));
  const confidential = el("input", { id: "confidential", type: "checkbox", "data-testid": "confidential" });
  const confidentialNote = el("span", { class: "note", id: "confidential-note", "data-testid": "confidential-note" });
  const confidentialRow = el(
    "div",
    { class: "check" },
    confidential,
    el("label", { for: confidential.id }, "Confidential: sealed so that only this console and the agent can read it (task key wrapped with HPKE, every message AES-128-GCM)"),
    " ",
    confidentialNote,
  );
  const canSeal = session.keys.available && session.capabilities.encryptionKeys.length > 0;
  if (!session.keys.available) confidentialNote.textContent = "This browser has no X25519 in WebCrypto: it cannot send confidential tasks, and shows their events sealed.";
  else if (!canSeal) confidentialNote.textContent = "The agent publishes no encryption key: it takes no confidential tasks.";
  const submit = el("button", { type: "submit", class: "primary", "data-testid": "submit-task" }, "Sign and send");
  const status = el("p", { class: "form-status", role: "status", "data-testid": "submit-status" });
  const form = el(
    "form",
    { class: "submit", "data-testid": "task-form", "aria-labelledby": "submit-title" },
    el("div", { class: "field" }, el("label", { for: select.id }, "Task type"), select, description),
    el("div", { class: "field" }, el("label", { for: textarea.id }, "Payload (a JSON object)"), textarea),
    approvalRow,
    confidentialRow,
    el("div", { class: "actions" }, submit),
    status,
  );
  const chosen = () => types.find((taskType) => taskType.type === select.value);
  const pick = () => {
    const taskType = chosen();
    description.textContent = taskType ? `${taskType.description}${taskType.estimatedTime ? ` · usually ${taskType.estimatedTime}` : ""}` : "";
    textarea.value = taskType ? JSON.stringify(examplePayload(taskType), null, 2) : "{}";
    approvalRow.hidden = taskType === undefined || !("require_approval" in schemaOf(taskType).properties);
    approval.checked = false;
    // A type that requires confidentiality is refused in plaintext: the box is ticked and stays so.
    const required = taskType?.requiresConfidentiality === true;
    confidential.checked = canSeal && required;
    confidential.disabled = !canSeal || required;
    if (required && canSeal) confidentialNote.textContent = "This task type requires it.";
    else if (canSeal) confidentialNote.textContent = "";
  };
  select.addEventListener("change", pick);
  pick();
  submit.disabled = types.length === 0;
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    // The form stays in the page between submissions: its status now speaks of this one, not of the task sent before.
    delete status.dataset.taskId;
    let payload: JsonObject;
    try {
      payload = parsePayload(textarea.value);
    } catch (error) {
      status.className = "form-status bad";
      status.textContent = `✗ ${describeError(error)}`;
      textarea.focus();
      return;
    }
    if (approval.checked && !approvalRow.hidden) payload.require_approval = true;
    submit.disabled = true;
    status.className = "form-status";
    const sealed = confidential.checked;
    status.textContent = sealed ? "sealing, signing and sending…" : "signing and sending…";
    submitTask(session, select.value, payload, { confidential: sealed })
      .then((outcome) => {
        if (outcome.task !== undefined) model.upsert(outcome.task);
        status.className = "form-status ok";
        status.textContent = `sent ${outcome.taskId}${sealed ? " (confidential)" : ""} · ${replyLine(outcome)}`;
        status.dataset.taskId = outcome.taskId;
        submitted(outcome.taskId);
      })
      .catch((error: unknown) => {
        status.className = "form-status bad";
        status.textContent = `✗ ${describeError(error)}`;
      })
      .finally(() => {
        submit.disabled = false;
      });
  });
  show(
    container,
    el("h2", { id: "submit-title" }, "New task"),
    el("p", { class: "lede" }, `Signed in this browser as ${session.identity.agentId} and sent to ${session.executor.agentId}.`),
    form,
  );
}
