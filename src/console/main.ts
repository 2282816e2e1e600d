// The operator console: shows the agent's capabilities (GetCapabilities),
// submits a signed p2p:task_request (P2PService.Send) and follows the task's
// signed events (P2PService.Watch), all over gRPC-web from the browser, with
// every executor message verified before it is shown.
import { toJson, type JsonObject } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-web";
import { CapabilitiesService, type AgentCapabilities } from "../../gen/synapse/v1/capabilities_pb.js";
import { MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import { P2PService } from "../../gen/synapse/v1/p2p_pb.js";
import {
  TaskState,
  type TaskCompletePayload,
  type TaskFailedPayload,
  type TaskRejectPayload,
  type TaskStatusUpdatePayload,
} from "../../gen/synapse/v1/payloads_pb.js";
import { stateAfterEvent } from "../protocol/event-state.js";
import { isTerminal, WAITING_STATES } from "../protocol/state-machine.js";
import { sealTaskRequest, verifyEnvelope, wireName, type Executor, type Verification } from "./envelopes.js";
import { loadOrCreateIdentity } from "./identity.js";
import { keyIdOf, type ConsoleIdentity } from "./keys.js";
import { issueToken } from "./token.js";
import { byTestId, el, formatBytes, setText, stateName } from "./view.js";

const transport = createGrpcWebTransport({ baseUrl: location.origin });
const capabilitiesService = createClient(CapabilitiesService, transport);
const p2p = createClient(P2PService, transport);

/** Connection-level failures worth resuming a watch after (as the Node client does). */
const RESUMABLE = new Set([Code.Unavailable, Code.Internal, Code.Unknown, Code.Aborted, Code.DeadlineExceeded]);
const MAX_WATCH_RETRIES = 3;

interface Session {
  identity: ConsoleIdentity;
  executor: Executor;
}

function describeError(error: unknown): string {
  if (error instanceof ConnectError) return `${Code[error.code]}: ${error.rawMessage}`;
  return error instanceof Error ? error.message : String(error);
}

function showError(error: unknown): void {
  const box = byTestId("error");
  box.textContent = describeError(error);
  box.hidden = false;
}

function clearError(): void {
  const box = byTestId("error");
  box.textContent = "";
  box.hidden = true;
}

/** The executor's identity, accepted only if its key id is the thumbprint of its key. */
async function executorOf(capabilities: AgentCapabilities): Promise<Executor> {
  if (capabilities.publicKey.byteLength !== 32) throw new Error("the agent declares no Ed25519 public key");
  if ((await keyIdOf(capabilities.publicKey)) !== capabilities.keyId) throw new Error("the agent's key id does not match its public key");
  return { agentId: capabilities.agentId, systemId: capabilities.systemId, keyId: capabilities.keyId, publicKey: capabilities.publicKey };
}

function showCapabilities(capabilities: AgentCapabilities): void {
  setText("agent-name", capabilities.agentName);
  setText("agent-id", capabilities.agentId);
  setText("agent-key-id", capabilities.keyId);
  setText("protocol-version", capabilities.protocolVersion);
  setText("max-file-size", formatBytes(capabilities.maxFileSize));
  setText("max-concurrent-tasks", String(capabilities.maxConcurrentTasks));
  setText("max-task-duration", `${capabilities.maxTaskDurationSeconds} s`);
  const list = byTestId("task-types");
  const select = byTestId("task-type", HTMLSelectElement);
  list.replaceChildren();
  select.replaceChildren();
  for (const taskType of capabilities.supportedTaskTypes) {
    list.append(el("li", { "data-task-type": taskType.type }, el("code", {}, taskType.type), ` ${taskType.name}: ${taskType.description}`));
    select.append(el("option", { value: taskType.type }, taskType.type));
  }
}

function showIdentity(identity: ConsoleIdentity): void {
  setText("requester-id", identity.agentId);
  setText("requester-key-id", identity.keyId);
}

/** What a verified event says, in one line. */
function detailOf(checked: Verification & { ok: true }): string {
  switch (checked.type) {
    case MessageType.TASK_STATUS_UPDATE: {
      const update = checked.payload as TaskStatusUpdatePayload;
      return `${update.progress}%${update.message ? ` ${update.message}` : ""}`;
    }
    case MessageType.TASK_COMPLETE:
      return (checked.payload as TaskCompletePayload).summary;
    case MessageType.TASK_FAILED: {
      const { error } = checked.payload as TaskFailedPayload;
      return error ? `${ErrorCode[error.code] ?? error.code}: ${error.message}` : "";
    }
    case MessageType.TASK_REJECT: {
      const { reason } = checked.payload as TaskRejectPayload;
      return reason ? `${ErrorCode[reason.code] ?? reason.code}: ${reason.message}` : "";
    }
    default:
      return "";
  }
}

function showResult(payload: TaskCompletePayload): void {
  const result = payload.result;
  if (result?.output !== undefined) {
    setText("task-result", JSON.stringify(toJson(ValueSchema, result.output), null, 2));
  } else if (result?.stream !== undefined) {
    // Reading result streams (ReadResult) is for a later version of the console.
    setText("task-result", `offered as a stream of ${result.stream.totalSize} bytes (read it with synapse or ReadResult)`);
  }
}

/** Clears the task panel for a new task. */
function resetTask(taskId: string): void {
  byTestId("task").hidden = false;
  setText("task-id", taskId);
  setText("send-reply", "sending…");
  setText("task-result", "");
  const state = byTestId("task-state");
  state.textContent = "pending";
  state.dataset.state = "pending";
  const outcome = byTestId("task-outcome");
  outcome.textContent = "";
  delete outcome.dataset.outcome;
  delete outcome.dataset.allVerified;
  byTestId("event-rows").replaceChildren();
}

function showState(state: TaskState): void {
  const element = byTestId("task-state");
  element.textContent = stateName(state);
  element.dataset.state = stateName(state);
}

function showOutcome(text: string, state: TaskState, allVerified: boolean): void {
  const outcome = byTestId("task-outcome");
  outcome.textContent = text;
  outcome.dataset.outcome = stateName(state);
  outcome.dataset.allVerified = String(allVerified);
}

function addEventRow(sequence: bigint, type: string, state: string, verified: boolean, detail: string): void {
  byTestId("event-rows").append(
    el(
      "tr",
      { "data-testid": "event", "data-sequence": String(sequence), "data-verified": String(verified) },
      el("td", {}, String(sequence)),
      el("td", {}, el("code", {}, type)),
      el("td", {}, state),
      el("td", { class: verified ? "ok" : "bad" }, verified ? "✓" : "✗"),
      el("td", {}, detail),
    ),
  );
}

/**
 * Follows the task's events from sequence 1, verifying each and replaying it
 * through the state machine, until the task ends or waits for its requester.
 * The opening snapshot is unsigned, so the page shows only what events prove.
 */
async function watchTask(session: Session, taskId: string, signal: AbortSignal): Promise<void> {
  let next = 1n;
  let state: TaskState = TaskState.PENDING;
  let attempts = 0;
  for (;;) {
    try {
      // A fresh token for each attempt: it is checked when the stream opens.
      const headers = { Authorization: `Bearer ${issueToken(session.identity, session.executor.agentId)}` };
      for await (const message of p2p.watch({ taskId, fromSequence: next }, { headers, signal })) {
        attempts = 0;
        if (signal.aborted) return; // replaced by a newer task: leave the page to it
        if (message.kind.case !== "event") continue; // snapshot (unsigned) or heartbeat (keeps the stream open)
        const event = message.kind.value;
        const checked = verifyEnvelope(event.message?.envelope, { executor: session.executor, self: session.identity.agentId, taskId, sequence: event.sequence });
        const after: TaskState | undefined = checked.ok ? stateAfterEvent(state, checked.type, checked.payload) : undefined;
        const problem = !checked.ok
          ? checked.reason
          : event.sequence !== next
            ? `arrived where ${next} was due`
            : after === undefined
              ? `${wireName(checked.type)} is not allowed after ${stateName(state)}`
              : undefined;
        if (!checked.ok || after === undefined || problem !== undefined) {
          // Nothing after an event that does not verify can be trusted either.
          addEventRow(event.sequence, checked.ok ? wireName(checked.type) : "?", "", false, problem ?? "");
          showOutcome(`stopped: event ${event.sequence} not verified ✗ (${problem ?? "unknown"})`, state, false);
          return;
        }
        state = after;
        next = event.sequence + 1n;
        addEventRow(event.sequence, wireName(checked.type), stateName(state), true, detailOf(checked));
        showState(state);
        if (checked.type === MessageType.TASK_COMPLETE) showResult(checked.payload as TaskCompletePayload);
        if (isTerminal(state)) {
          showOutcome(`${stateName(state)} · all ${next - 1n} events verified ✓`, state, true);
          return;
        }
        if (WAITING_STATES.has(state)) {
          // Answering need_info and need_human is for a later version of the console.
          showOutcome(`${stateName(state)}: the task waits for its requester · all ${next - 1n} events verified ✓`, state, true);
          return;
        }
      }
      // The server ended the stream before a terminal event (it should not): say where things stand.
      showOutcome(`${stateName(state)} · the stream ended · ${next - 1n} events verified ✓`, state, true);
      return;
    } catch (error) {
      const connectError = ConnectError.from(error);
      if (signal.aborted || !RESUMABLE.has(connectError.code) || attempts >= MAX_WATCH_RETRIES) throw connectError;
      attempts++;
      await new Promise((resolve) => setTimeout(resolve, 500 * 2 ** (attempts - 1)));
    }
  }
}

/** Sends the signed task_request and verifies the reply; returns the task id. */
async function submitTask(session: Session, taskType: string, payload: JsonObject, signal: AbortSignal): Promise<string> {
  const taskId = crypto.randomUUID();
  resetTask(taskId);
  const { envelope } = sealTaskRequest(session.identity, session.executor, { taskId, taskType, payload });
  // wait unset: the reply comes as soon as the task is confirmed or rejected; Watch shows the rest.
  const response = await p2p.send({ envelope }, { signal });
  const reply = verifyEnvelope(response.reply?.envelope, { executor: session.executor, self: session.identity.agentId, taskId, checkTime: true });
  setText("send-reply", reply.ok ? `${wireName(reply.type)} ✓` : `✗ ${reply.reason}`);
  if (!reply.ok) throw new Error(`the reply to the task request does not verify: ${reply.reason}`);
  return taskId;
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

function wireForm(session: Session): void {
  const form = byTestId("task-form", HTMLFormElement);
  const select = byTestId("task-type", HTMLSelectElement);
  const textarea = byTestId("task-payload", HTMLTextAreaElement);
  const button = byTestId("submit-task", HTMLButtonElement);
  let running: AbortController | undefined;
  button.disabled = select.options.length === 0;
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearError();
    let payload: JsonObject;
    try {
      payload = parsePayload(textarea.value);
    } catch (error) {
      showError(error); // the task on screen, if any, goes on
      return;
    }
    running?.abort(); // a new task replaces the one on screen
    const controller = new AbortController();
    running = controller;
    button.disabled = true;
    const run = async () => {
      try {
        const taskId = await submitTask(session, select.value, payload, controller.signal);
        // Sent: another task may be submitted while this one is watched (it replaces this one).
        button.disabled = false;
        await watchTask(session, taskId, controller.signal);
      } catch (error) {
        if (!controller.signal.aborted) showError(error);
      } finally {
        if (running === controller) button.disabled = false;
      }
    };
    void run();
  });
}

async function start(): Promise<void> {
  // WebCrypto (the key id) and crypto.randomUUID exist only in secure contexts.
  if (!isSecureContext) throw new Error("the console needs a secure context: open it over https, or on localhost");
  const identity = await loadOrCreateIdentity();
  showIdentity(identity);
  const { capabilities } = await capabilitiesService.getCapabilities({});
  if (capabilities === undefined) throw new Error("GetCapabilities returned no capabilities");
  showCapabilities(capabilities);
  const executor = await executorOf(capabilities);
  setText("agent-key-check", "✓ matches its public key");
  wireForm({ identity, executor });
  setText("status", "ready");
  byTestId("status").dataset.ready = "true";
}

start().catch((error: unknown) => {
  setText("status", "not ready");
  showError(error);
});
