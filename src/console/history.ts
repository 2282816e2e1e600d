// A task's message history: one row per signed event, with the result of
// its verification, its decoded header and payload (what the signed bytes
// say, as JSON), when it was signed and how long after the one before.
import { toJson, type Message } from "@bufbuild/protobuf";
import type { GroupEventPayload } from "../../gen/synapse/v1/a2n_pb.js";
import { HeaderSchema, MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import type {
  TaskAckPayload,
  TaskCompletePayload,
  TaskFailedPayload,
  TaskNeedHumanPayload,
  TaskNeedInfoPayload,
  TaskRejectPayload,
  TaskStatusUpdatePayload,
} from "../../gen/synapse/v1/payloads_pb.js";
import { messageTypeInfo } from "../protocol/message-types.js";
import { toHex } from "./bytes.js";
import { wireName, type Verification } from "./envelopes.js";
import type { LogEntry } from "./event-log.js";
import { clockTime, duration } from "./format.js";
import { groupEventSummary } from "./group-format.js";
import { el, stateName } from "./view.js";

/** What a verified event says, in one line. */
export function eventSummary(checked: Verification & { ok: true }): string {
  const payload = checked.payload;
  switch (checked.type) {
    case MessageType.TASK_STATUS_UPDATE: {
      const update = payload as TaskStatusUpdatePayload;
      return `${update.progress}%${update.message ? ` ${update.message}` : ""}`;
    }
    case MessageType.TASK_COMPLETE:
      return (payload as TaskCompletePayload).summary;
    case MessageType.TASK_FAILED: {
      const { error } = payload as TaskFailedPayload;
      return error ? `${ErrorCode[error.code]?.toLowerCase() ?? error.code}: ${error.message}` : "";
    }
    case MessageType.TASK_REJECT: {
      const { reason } = payload as TaskRejectPayload;
      return reason ? `${ErrorCode[reason.code]?.toLowerCase() ?? reason.code}: ${reason.message}` : "";
    }
    case MessageType.TASK_NEED_INFO: {
      const info = payload as TaskNeedInfoPayload;
      return `${info.question || "asks for"} (${info.missingFields.map((field) => field.field).join(", ")})`;
    }
    case MessageType.TASK_NEED_HUMAN: {
      const human = payload as TaskNeedHumanPayload;
      return `${human.reason?.message ?? "asks for a decision"} · level ${human.escalationLevel}`;
    }
    case MessageType.TASK_ACK: {
      const ack = payload as TaskAckPayload;
      return `${wireName(ack.acknowledgedType)} → ${stateName(ack.state)}${ack.message ? ` (${ack.message})` : ""}`;
    }
    case MessageType.A2N_GROUP_EVENT:
      return groupEventSummary(payload as GroupEventPayload);
    default:
      return "";
  }
}

function jsonBlock(label: string, value: unknown): HTMLElement {
  return el("div", { class: "json" }, el("h4", {}, label), el("pre", {}, JSON.stringify(value, null, 2)));
}

function decoded(entry: LogEntry): HTMLElement[] {
  const blocks: HTMLElement[] = [];
  const checked = entry.verification;
  if (checked.header !== undefined) {
    blocks.push(jsonBlock(checked.ok ? "Header (verified)" : "Header (as claimed, not verified)", toJson(HeaderSchema, checked.header)));
  }
  if (checked.ok) {
    const schema = messageTypeInfo(checked.type)?.payloadSchema;
    if (schema !== undefined) blocks.push(jsonBlock(`Payload: ${schema.typeName}`, toJson(schema, checked.payload as Message)));
  }
  const signature = entry.envelope?.signature;
  if (signature !== undefined) {
    blocks.push(
      el(
        "p",
        { class: "signature" },
        `Ed25519 signature by key ${signature.keyId}: `,
        el("code", {}, `${toHex(signature.value).slice(0, 32)}…`),
        ` over ${entry.envelope!.header.byteLength} header and ${entry.envelope!.payload.byteLength} payload bytes`,
      ),
    );
  }
  return blocks;
}

/**
 * The row of one event. `previousMs` is when the event before it was
 * signed (or the task created), for the time between them.
 */
export function historyRow(entry: LogEntry, previousMs: number | undefined): HTMLTableRowElement {
  const checked = entry.verification;
  const type = checked.ok ? wireName(checked.type) : checked.header ? wireName(checked.header.messageType) : "?";
  const summary = checked.ok ? eventSummary(checked) : `not verified: ${checked.reason}`;
  const gap = entry.sentAtMs !== undefined && previousMs !== undefined ? `+${duration(entry.sentAtMs - previousMs)}` : "";
  const verified = checked.ok && entry.problem === undefined;
  return el(
    "tr",
    {
      "data-testid": "event",
      "data-sequence": String(entry.sequence),
      "data-verified": String(checked.ok),
      "data-sealed": String(checked.ok && checked.sealed === true),
      "data-type": type,
      class: verified ? "" : "invalid",
    },
    el("td", { class: "num" }, String(entry.sequence)),
    el("td", {}, el("code", {}, type)),
    el("td", {}, entry.stateAfter !== undefined ? stateName(entry.stateAfter) : "—"),
    el(
      "td",
      {
        class: checked.ok ? "ok" : "bad",
        "data-testid": "event-verification",
        title: checked.ok ? (checked.sealed ? "sealed: opened with the task key, and the signature inside and the headers check out" : "signature and headers check out") : checked.reason,
      },
      checked.ok ? (checked.sealed ? "✓ valid (opened)" : "✓ valid") : "✗ invalid",
    ),
    el("td", { class: "time" }, clockTime(entry.sentAtMs, true), gap ? el("small", {}, ` ${gap}`) : ""),
    el("td", {}, el("details", {}, el("summary", {}, entry.problem && checked.ok ? `${summary} · ${entry.problem}` : summary || "details"), ...decoded(entry))),
  );
}

/** The empty history table; rows are appended as events arrive. A group's log says whose key it is checked against. */
export function historyTable(caption = "Signed events, verified in this browser against the agent's key"): { table: HTMLTableElement; body: HTMLTableSectionElement } {
  const body = el("tbody", { "data-testid": "event-rows" });
  const table = el(
    "table",
    { class: "history", "data-testid": "history" },
    el("caption", {}, caption),
    el("thead", {}, el("tr", {}, ...["#", "Message", "State after", "Signature", "Signed at", "What it says"].map((name) => el("th", { scope: "col" }, name)))),
    body,
  );
  return { table, body };
}
