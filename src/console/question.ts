// What a waiting task asks of its requester, and the form to answer it:
// the need-info question with its missing fields, or the need-human reason,
// context, options, escalation level and a live countdown to its deadline.
// Shown in the inbox and on the task's page; read-only for a task this
// console did not request (an operator's view).
import type { Task } from "../../gen/synapse/v1/p2p_pb.js";
import { TaskState } from "../../gen/synapse/v1/payloads_pb.js";
import { decisionForm, infoForm, type Answered } from "./answer-forms.js";
import { clockTime, countdown, msOf } from "./format.js";
import type { Session } from "./rpc.js";
import { el } from "./view.js";

const LEVELS = ["", "team", "manager", "executive"];

/** Deadlines shown on the page, ticked once a second by one timer. */
const ticking = new Set<{ element: HTMLElement; deadlineMs: number }>();
let timer: ReturnType<typeof setInterval> | undefined;

function tick(): void {
  const now = Date.now();
  for (const item of ticking) {
    if (!item.element.isConnected) {
      ticking.delete(item);
      continue;
    }
    const passed = now >= item.deadlineMs;
    item.element.textContent = passed ? "deadline passed" : `${countdown(item.deadlineMs, now)} left`;
    item.element.classList.toggle("bad", passed || item.deadlineMs - now < 60_000);
  }
  if (ticking.size === 0 && timer !== undefined) {
    clearInterval(timer);
    timer = undefined;
  }
}

/** A countdown to `deadlineMs` that updates itself while it is on the page. */
export function deadlineCountdown(deadlineMs: number): HTMLElement {
  const element = el("span", { class: "countdown", "data-testid": "deadline-countdown", "data-deadline": new Date(deadlineMs).toISOString(), role: "timer" });
  ticking.add({ element, deadlineMs });
  timer ??= setInterval(tick, 1000);
  queueMicrotask(tick);
  return element;
}

/** What escalation levels are, for the badge's tooltip. */
const ESCALATION_MEANING =
  "Escalation levels say who decides, by seniority: 1 the team (the task's requester), 2 a manager, 3 an executive. When a level's deadline passes undecided, the decision moves up a level; after the last level the task fails.";

function escalation(level: number): HTMLElement {
  const name = LEVELS[level] ?? "";
  return el(
    "span",
    { class: `escalation level-${Math.min(level, 3)}`, "data-testid": "escalation", "data-level": String(level), title: ESCALATION_MEANING },
    `escalation level ${level}${name ? ` · ${name}` : ""}`,
  );
}

/** One sentence on what happens if nobody decides: the next level of the task type's policy, or the end. */
function escalationHelp(session: Session, task: Task, level: number, hasDeadline: boolean): HTMLElement {
  const levels = session.capabilities.supportedTaskTypes.find((type) => type.type === task.taskType)?.escalation?.levels ?? [];
  const next = levels[level];
  const of = levels.length >= level && levels.length > 0 ? ` of ${levels.length}` : "";
  const here = `This decision is at escalation level ${level}${of}${LEVELS[level] ? ` (${LEVELS[level]})` : ""}: the level says who may decide it.`;
  const then = !hasDeadline
    ? " It has no deadline: the task waits until it is decided."
    : next !== undefined
      ? ` If nobody decides by the deadline it moves to level ${level + 1}${LEVELS[level + 1] ? ` (${LEVELS[level + 1]})` : ""}, decided by ${[...(next.requester ? ["the requester"] : []), ...next.agentIds].join(", ")}.`
      : " If nobody decides by the deadline, the task fails.";
  return el("p", { class: "note", "data-testid": "escalation-help" }, here + then);
}

function readOnly(session: Session, task: Task): HTMLElement | undefined {
  if (session.owns(task.requester?.agentId)) return undefined;
  return el("p", { class: "note read-only", "data-testid": "read-only" }, `Read-only: only its requester, ${task.requester?.agentId ?? "another agent"}, may answer this task.`);
}

/** Who decides at this level, in words: "you", "the requester", or the contacts' ids. */
function decidersLine(session: Session, task: Task, deciders: readonly string[]): string {
  const requester = task.requester?.agentId ?? "";
  const named = deciders.length === 0 ? [requester] : deciders;
  return named.map((id) => (id === session.identity.agentId ? "you" : id === requester ? `the requester (${id})` : id)).join(", ");
}

/** The note in place of the decision form for an identity that may not decide at this level. */
function notDecider(session: Session, task: Task, deciders: readonly string[]): HTMLElement | undefined {
  if (session.mayDecide(task)) return undefined;
  const who = decidersLine(session, task, deciders);
  const text = session.owns(task.requester?.agentId)
    ? `At this escalation level only ${who} may decide; you can follow it here.`
    : `Read-only: only ${who} may decide at this level.`;
  return el("p", { class: "note read-only", "data-testid": "read-only" }, text);
}

/** What the task asks, with the form to answer it, or nothing when it asks nothing. */
export function questionPanel(session: Session, task: Task, answered: Answered): HTMLElement | undefined {
  const info = task.pendingInfo;
  if (task.state === TaskState.INFO_NEEDED && info !== undefined) {
    const requiredBy = msOf(info.requiredBy);
    return el(
      "section",
      { class: "question-panel", "data-testid": "question", "data-kind": "info" },
      el("h3", {}, "Information needed"),
      el("p", {}, info.question || `The agent needs ${info.missingFields.map((field) => field.field).join(", ")}.`),
      requiredBy !== undefined ? el("p", { class: "meta" }, `answer by ${clockTime(requiredBy)} · `, deadlineCountdown(requiredBy)) : "",
      readOnly(session, task) ?? infoForm(session, task, info, answered),
    );
  }
  const human = task.pendingDecision;
  if ((task.state === TaskState.NEED_HUMAN || task.state === TaskState.HUMAN_DECIDING) && human !== undefined) {
    const deadline = msOf(human.deadline);
    const context = human.context;
    return el(
      "section",
      { class: "question-panel", "data-testid": "question", "data-kind": "decision" },
      el("h3", {}, task.state === TaskState.HUMAN_DECIDING ? "Decision in progress" : "Decision needed"),
      el(
        "p",
        { class: "meta" },
        escalation(human.escalationLevel),
        deadline !== undefined ? el("span", {}, ` · decide by ${clockTime(deadline)} · `, deadlineCountdown(deadline)) : "",
        el("span", { "data-testid": "deciders" }, ` · decided by ${decidersLine(session, task, human.deciders)}`),
      ),
      escalationHelp(session, task, human.escalationLevel, deadline !== undefined),
      el("p", {}, human.reason?.message ?? "", human.reason?.code ? el("small", {}, ` (${human.reason.code})`) : ""),
      context !== undefined
        ? el(
            "dl",
            { class: "context" },
            ...(context.taskSummary ? [el("dt", {}, "Task"), el("dd", {}, context.taskSummary)] : []),
            ...(context.blockedReason ? [el("dt", {}, "Blocked by"), el("dd", {}, context.blockedReason)] : []),
            el("dt", {}, "Progress"),
            el("dd", {}, `${context.currentProgress}%`),
          )
        : "",
      notDecider(session, task, human.deciders) ?? decisionForm(session, task, human, answered),
    );
  }
  return undefined;
}
