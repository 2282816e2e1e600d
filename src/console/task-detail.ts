// One task on its own page: what it is and who asked for it, its path
// through the state machine as a graph, what it waits for (with the form to
// answer it), its message history, and its result. Followed live with one
// Watch stream from the first event: every event is verified, replayed
// through the state machine, drawn and listed as it arrives.
import { MessageType } from "../../gen/synapse/v1/envelope_pb.js";
import { ErrorCode } from "../../gen/synapse/v1/errors_pb.js";
import type { Task } from "../../gen/synapse/v1/p2p_pb.js";
import type { TaskCompletePayload } from "../../gen/synapse/v1/payloads_pb.js";
import { isTerminal } from "../protocol/state-machine.js";
import { cancelForm } from "./answer-forms.js";
import { EventLog } from "./event-log.js";
import { clockTime, msOf, relative } from "./format.js";
import { historyRow, historyTable } from "./history.js";
import { questionPanel } from "./question.js";
import { resultPanel } from "./result.js";
import { describeError, type Session } from "./rpc.js";
import { stateGraph, statePath } from "./state-graph.js";
import { verifyMessage, type Checked } from "./task-keys.js";
import type { SendOutcome } from "./steering.js";
import type { TaskModel } from "./task-model.js";
import type { WatchPool } from "./watch-pool.js";
import { followTask } from "./watch.js";
import { el, note, show, stateBadge, stateName } from "./view.js";

export class TaskDetail {
  private controller: AbortController | undefined;
  private unsubscribe: (() => void) | undefined;
  private log: EventLog | undefined;
  private taskId: string | undefined;
  private signedResult: TaskCompletePayload | undefined;
  /** Events are opened (a confidential task's) and added one after the other, in the order they came. */
  private queue: Promise<void> = Promise.resolve();
  /** Whether the task is confidential, as its snapshot says: then every event must come sealed. */
  private confidential = false;
  /** The question drawn, so an unchanged one (and what the user typed in it) is not redrawn. */
  private questionKey = "";

  /** Kept across redraws: focus moves here when a task is opened, and must stay. */
  private readonly title = el("h2", { id: "task-title", tabindex: "-1" });
  private readonly stateShown = el("span", { "data-testid": "task-state" });
  /** Redrawn with the task; the title row above it is not, so focus on the title stays. */
  private readonly summary = el("div", { class: "task-summary" });
  private readonly graph = el("div", { class: "graph-panel" });
  private readonly question = el("div", {});
  private readonly actions = el("div", {});
  private readonly outcome = el("div", { class: "outcome" });
  private readonly history = historyTable();
  private readonly stream = el("p", { class: "note stream-status", "data-testid": "stream-status", role: "status" });

  constructor(
    private readonly container: HTMLElement,
    private readonly session: Session,
    private readonly model: TaskModel,
    private readonly pool: WatchPool,
  ) {}

  /** Shows a task and follows it until another is opened or the view closes. */
  open(taskId: string): void {
    if (taskId === this.taskId) return;
    this.close();
    this.taskId = taskId;
    this.signedResult = undefined;
    this.questionKey = "";
    this.queue = Promise.resolve();
    this.confidential = false;
    this.history.body.replaceChildren();
    delete this.actions.dataset.cancellable;
    delete this.outcome.dataset.key;
    this.pool.exclude(taskId);
    show(
      this.container,
      el("div", { class: "detail-head" }, el("div", { class: "title-row" }, this.title, this.stateShown), this.summary, this.stream),
      this.question,
      this.actions,
      el("section", { "aria-label": "State machine" }, el("h3", {}, "Path through the state machine"), this.graph),
      this.outcome,
      el("section", { "aria-label": "Message history" }, el("h3", {}, "Message history"), this.history.table),
    );
    this.container.dataset.taskId = taskId;
    show(this.title, "Task ", el("code", { "data-testid": "task-id" }, taskId));
    show(this.stateShown);
    const held = this.model.get(taskId);
    if (held !== undefined) this.render(held);
    else show(this.summary, note("loading…"));
    this.unsubscribe = this.model.subscribe((task) => {
      if (task.taskId === this.taskId) this.render(task);
    });
    const controller = new AbortController();
    this.controller = controller;
    this.stream.textContent = "following live (Watch)…";
    followTask(this.session, taskId, 1n, { snapshot: (task) => this.onSnapshot(task), event: (sequence, envelope) => this.onEvent(sequence, envelope) }, controller.signal)
      .then(() => {
        if (!controller.signal.aborted) this.stream.textContent = "the task is over: its log is complete";
      })
      .catch((error: unknown) => {
        if (controller.signal.aborted) return;
        this.stream.textContent = `✗ ${describeError(error)}`;
        this.stream.classList.add("bad");
        if (this.log === undefined) show(this.summary, el("p", { class: "bad", "data-testid": "task-missing" }, `${describeError(error)} (or the task is not one this identity may read).`));
      });
  }

  close(): void {
    this.controller?.abort();
    this.controller = undefined;
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    this.log = undefined;
    this.taskId = undefined;
    this.pool.exclude(undefined);
  }

  private onSnapshot(task: Task): void {
    this.model.upsert(task);
    // The requester is whom every event must be addressed to: this console, or another agent for an operator.
    this.log ??= new EventLog(this.session.executor, task.requester?.agentId ?? this.session.identity.agentId, task.taskId);
    this.confidential = task.confidential !== undefined;
    this.renderGraph();
    this.render(this.model.get(task.taskId) ?? task);
  }

  private onEvent(sequence: bigint, envelope: Parameters<EventLog["add"]>[1]): void {
    const log = this.log;
    if (log === undefined) return;
    const confidential = this.confidential;
    this.queue = this.queue.then(async () => {
      const checked = await verifyMessage(this.session.keys, this.session.executor, envelope, { ...log.expectations(sequence), confidential });
      // Another task may have been opened meanwhile.
      if (this.log === log) this.addEvent(log, sequence, checked);
    });
  }

  private addEvent(log: EventLog, sequence: bigint, checked: Checked): void {
    const before = log.entries.at(-1)?.sentAtMs ?? msOf(this.model.get(this.taskId ?? "")?.createdAt);
    const entry = log.add(sequence, checked.envelope, checked.verification);
    if (entry === undefined) return;
    this.history.body.append(historyRow(entry, before));
    const verified = entry.verification;
    if (verified.ok && entry.stateAfter !== undefined) {
      if (verified.type === MessageType.TASK_COMPLETE) this.signedResult = verified.payload as TaskCompletePayload;
      this.model.applyEvent(log.taskId, sequence, verified.header, verified.type, verified.payload);
    }
    this.renderGraph();
    const task = this.model.get(this.taskId ?? "");
    if (task !== undefined) this.render(task);
  }

  private renderGraph(): void {
    const log = this.log;
    if (log === undefined) return;
    const verdict = log.broken
      ? el("p", { class: "bad", "data-testid": "log-verdict", "data-all-verified": "false" }, `Event ${log.broken.sequence} did not verify (${log.broken.reason}): the path stops at the last event that did.`)
      : el("p", { class: "ok", "data-testid": "log-verdict", "data-all-verified": "true" }, `${log.entries.length === 1 ? "The 1 event" : `All ${log.entries.length} events`} verified ✓`);
    show(this.graph, stateGraph(log.path, { broken: log.broken !== undefined }), statePath(log.path, log.broken), verdict);
  }

  private answered = (outcome: SendOutcome): void => {
    if (outcome.task !== undefined) this.model.upsert(outcome.task);
  };

  private render(task: Task): void {
    const mine = this.session.owns(task.requester?.agentId);
    const created = msOf(task.createdAt);
    const updated = msOf(task.updatedAt);
    this.stateShown.dataset.state = stateName(task.state);
    show(this.stateShown, stateBadge(task.state));
    show(
      this.summary,
      el(
        "dl",
        { class: "facts" },
        el("dt", {}, "Type"),
        el("dd", { "data-testid": "task-type-shown" }, task.taskType),
        el("dt", {}, "Requested by"),
        el("dd", { "data-testid": "task-requester" }, mine ? "you" : el("span", {}, el("code", {}, task.requester?.agentId ?? "?"), " (read-only)")),
        ...(task.confidential !== undefined
          ? [
              el("dt", {}, "Confidential"),
              el(
                "dd",
                { "data-testid": "task-confidential" },
                this.session.keys.available ? "yes: its messages are sealed, and opened in this browser with its task key" : "yes, and shown sealed: this browser has no X25519 in WebCrypto",
              ),
            ]
          : []),
        el("dt", {}, "Created"),
        el("dd", {}, `${clockTime(created)} (${relative(created)})`),
        el("dt", {}, "Updated"),
        el("dd", {}, `${clockTime(updated)} · event ${task.lastSequence}`),
        el("dt", {}, "Progress"),
        el("dd", {}, el("progress", { max: "100", value: String(task.progress), "aria-label": "progress" }), ` ${task.progress}%${task.statusMessage ? ` · ${task.statusMessage}` : ""}`),
      ),
    );
    this.renderQuestion(task);
    const cancellable = mine && !isTerminal(task.state);
    if (this.actions.dataset.cancellable !== String(cancellable)) {
      this.actions.dataset.cancellable = String(cancellable);
      show(this.actions, ...(cancellable ? [cancelForm(this.session, task, this.answered)] : []));
    }
    this.renderOutcome(task);
  }

  private renderQuestion(task: Task): void {
    const key = `${task.state}:${task.pendingInfo ? "i" : ""}${task.pendingDecision?.decisionId ?? ""}`;
    if (key === this.questionKey) return;
    this.questionKey = key;
    const panel = questionPanel(this.session, task, this.answered);
    show(this.question, ...(panel ? [panel] : []));
  }

  private renderOutcome(task: Task): void {
    if (!isTerminal(task.state)) {
      show(this.outcome);
      return;
    }
    const parts: HTMLElement[] = [el("h3", {}, "Outcome")];
    const failure = task.error ?? task.rejection?.reason;
    if (failure !== undefined) {
      parts.push(el("p", { class: "bad", "data-testid": "task-error" }, `${ErrorCode[failure.code]?.toLowerCase() ?? failure.code}: ${failure.message}`));
    }
    const signed = this.signedResult !== undefined;
    const result = this.signedResult?.result ?? task.result;
    if (result !== undefined) parts.push(resultPanel(this.session, task.taskId, result, signed, task.confidential !== undefined));
    const key = `${task.state}:${signed}:${failure?.message ?? ""}`;
    if (this.outcome.dataset.key === key) return;
    this.outcome.dataset.key = key;
    show(this.outcome, ...parts);
  }
}
