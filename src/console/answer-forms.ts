// The forms a requester answers a task with: information asked for
// (built from need_info's missing_fields, each with its suggested value and
// alternatives), a human decision (need_human's options: approve, approve
// with changes, reject), and a cancel. Each sends one signed message and
// hands back the task the agent shows after it; sealed when the task is
// confidential.
import { toJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema, type Value } from "@bufbuild/protobuf/wkt";
import type { Task } from "../../gen/synapse/v1/p2p_pb.js";
import { TaskState, type TaskNeedHumanPayload, type TaskNeedInfoPayload } from "../../gen/synapse/v1/payloads_pb.js";
import { jsonInline, parseTyped } from "./format.js";
import { describeError, type Session } from "./rpc.js";
import { cancelTask, decide, provideInfo, replyLine, takeUpDecision, type SendOutcome, type TaskRef } from "./steering.js";
import { button, el } from "./view.js";

/** Called with what the agent answered: the task after the message. */
export type Answered = (outcome: SendOutcome) => void;

let forms = 0;
const DECIDER_KEY = "synapse.console.decided-by";

function valueOf(value: Value | undefined): JsonValue | undefined {
  return value === undefined ? undefined : (toJson(ValueSchema, value) as JsonValue);
}

/** A status line under a form: what was sent, or why it was refused. */
function statusLine(): { element: HTMLElement; ok(text: string): void; fail(error: unknown): void; busy(): void } {
  const element = el("p", { class: "form-status", role: "status", "data-testid": "form-status" });
  return {
    element,
    busy: () => {
      element.className = "form-status";
      element.textContent = "sending…";
    },
    ok: (text) => {
      element.className = "form-status ok";
      element.textContent = text;
    },
    fail: (error) => {
      element.className = "form-status bad";
      element.textContent = `✗ ${describeError(error)}`;
    },
  };
}

async function run(form: HTMLFormElement, status: ReturnType<typeof statusLine>, send: () => Promise<SendOutcome>, answered: Answered): Promise<void> {
  const controls = [...form.querySelectorAll<HTMLButtonElement | HTMLInputElement | HTMLTextAreaElement>("button, input, textarea")];
  for (const control of controls) control.disabled = true;
  status.busy();
  try {
    const outcome = await send();
    status.ok(`sent · ${replyLine(outcome)}`);
    answered(outcome);
  } catch (error) {
    status.fail(error);
  } finally {
    for (const control of controls) control.disabled = false;
  }
}

/** The need-info form: one input per missing field, prefilled with the suggested value (the question itself is shown above it). */
export function infoForm(session: Session, task: TaskRef, asked: TaskNeedInfoPayload, answered: Answered): HTMLFormElement {
  const id = `info-${++forms}`;
  const status = statusLine();
  const inputs: Array<[string, HTMLInputElement]> = [];
  const form = el("form", { class: "answer", "data-testid": "info-form", "aria-label": "Provide the information asked for" });
  for (const [index, field] of asked.missingFields.entries()) {
    const inputId = `${id}-${index}`;
    const suggested = valueOf(field.suggestedValue);
    const input = el("input", { id: inputId, name: field.field, "data-field": field.field, value: jsonInline(suggested), autocomplete: "off", required: "" });
    inputs.push([field.field, input]);
    const alternatives = field.alternatives.map((value) => valueOf(value)).filter((value): value is JsonValue => value !== undefined);
    const choices = [suggested, ...alternatives].filter((value): value is JsonValue => value !== undefined);
    form.append(
      el(
        "div",
        { class: "field" },
        el("label", { for: inputId }, el("code", {}, field.field), field.reason ? ` ${field.reason}` : ""),
        input,
        choices.length > 0
          ? el(
              "div",
              { class: "choices", role: "group", "aria-label": `Values offered for ${field.field}` },
              ...choices.map((value, i) =>
                button(`${i === 0 && suggested !== undefined ? "suggested: " : ""}${jsonInline(value)}`, () => {
                  input.value = jsonInline(value);
                  input.focus();
                }, { class: "chip", "data-choice": jsonInline(value) }),
              ),
            )
          : "",
      ),
    );
  }
  const noteId = `${id}-note`;
  const noteInput = el("input", { id: noteId, name: "note", autocomplete: "off" });
  form.append(el("div", { class: "field" }, el("label", { for: noteId }, "Note (optional)"), noteInput));
  form.append(el("div", { class: "actions" }, el("button", { type: "submit", class: "primary", "data-testid": "provide-info" }, "Provide information")), status.element);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const fields: JsonObject = {};
    for (const [name, input] of inputs) fields[name] = parseTyped(input.value);
    void run(form, status, () => provideInfo(session, task, fields, noteInput.value), answered);
  });
  return form;
}

/** The decision form: the options offered (editable), notes, who decides; approve, approve with changes, or reject. */
export function decisionForm(session: Session, task: Task, asked: TaskNeedHumanPayload, answered: Answered): HTMLFormElement {
  const id = `decide-${++forms}`;
  const status = statusLine();
  const form = el("form", { class: "answer", "data-testid": "decision-form", "aria-label": "Decide" });
  const inputs: Array<[string, HTMLInputElement]> = [];
  if (asked.options.length > 0) {
    // Each option is a field of the task and the value the agent proposes for it: what the box holds is what the decision sends.
    const options = el(
      "fieldset",
      { class: "options" },
      el("legend", {}, "Options offered by the agent"),
      el(
        "p",
        { class: "note", "data-testid": "options-help" },
        "Each option is a field and the value the agent proposes for it. Approve sends the values as they stand here; change one and choose Approve with changes to run the task with your value in its payload. Reject ignores them.",
      ),
    );
    for (const [index, option] of asked.options.entries()) {
      const inputId = `${id}-option-${index}`;
      const input = el("input", { id: inputId, name: option.field, "data-field": option.field, value: jsonInline(valueOf(option.value)), autocomplete: "off" });
      inputs.push([option.field, input]);
      options.append(
        el(
          "div",
          { class: "field" },
          el(
            "label",
            { for: inputId },
            "Value of ",
            el("code", {}, option.field),
            option.prosCons ? `: ${option.prosCons}` : "",
            option.confidence ? el("small", {}, ` · the agent's confidence ${option.confidence}%`) : "",
          ),
          input,
        ),
      );
    }
    form.append(options);
  }
  const notes = el("textarea", { id: `${id}-notes`, name: "notes", rows: "2" });
  const reason = el("input", { id: `${id}-reason`, name: "reason", autocomplete: "off", "data-testid": "rejection-reason" });
  const decider = el("input", { id: `${id}-by`, name: "decided-by", autocomplete: "name", value: localStorage.getItem(DECIDER_KEY) ?? "" });
  form.append(
    el("div", { class: "field" }, el("label", { for: notes.id }, "Notes (optional)"), notes),
    el("div", { class: "field" }, el("label", { for: reason.id }, "Reason, if you reject"), reason),
    el("div", { class: "field" }, el("label", { for: decider.id }, "Decided by"), decider),
  );
  const send = (action: "approve" | "modify" | "reject") => {
    if (action === "reject" && reason.value.trim() === "") {
      status.fail(new Error("say why you reject: the requester and the executor see the reason"));
      reason.focus();
      return;
    }
    const fields: JsonObject = {};
    for (const [name, input] of inputs) fields[name] = parseTyped(input.value);
    localStorage.setItem(DECIDER_KEY, decider.value);
    void run(
      form,
      status,
      () =>
        decide(session, task, task.requester?.agentId ?? session.identity.agentId, {
          action,
          decisionId: asked.decisionId,
          fields: action === "reject" ? {} : fields,
          notes: notes.value,
          rejectionReason: reason.value,
          decidedBy: decider.value,
        }),
      answered,
    );
  };
  const actions = el(
    "div",
    { class: "actions" },
    button("Approve", () => send("approve"), { class: "primary", "data-testid": "approve" }),
    button("Approve with changes", () => send("modify"), { "data-testid": "modify" }),
    button("Reject", () => send("reject"), { class: "danger", "data-testid": "reject" }),
  );
  // Taking a decision up (task_ack) is the requester's message only.
  if (task.state === TaskState.NEED_HUMAN && session.owns(task.requester?.agentId)) {
    actions.append(button("I'm deciding (acknowledge)", () => void run(form, status, () => takeUpDecision(session, task), answered), { "data-testid": "take-up" }));
  }
  form.addEventListener("submit", (event) => event.preventDefault());
  form.append(actions, status.element);
  return form;
}

/** Cancel, with an optional reason. */
export function cancelForm(session: Session, task: TaskRef, answered: Answered): HTMLFormElement {
  const id = `cancel-${++forms}`;
  const status = statusLine();
  const reason = el("input", { id: `${id}-reason`, name: "reason", autocomplete: "off", placeholder: "why (optional)" });
  const form = el(
    "form",
    { class: "answer cancel", "data-testid": "cancel-form", "aria-label": "Cancel the task" },
    el("label", { for: reason.id, class: "visually-hidden" }, "Reason for cancelling"),
    reason,
    el("button", { type: "submit", class: "danger", "data-testid": "cancel-task" }, "Cancel task"),
    status.element,
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    void run(form, status, () => cancelTask(session, task, reason.value), answered);
  });
  return form;
}
