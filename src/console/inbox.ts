// The inbox: every task waiting for its requester (information, or a human
// decision), each with what it asks and the form to answer it; the
// escalation level and a countdown to the deadline for decisions. Read with
// ListTasks by state, kept current by the Watch streams of the pool (a task
// that starts waiting appears, one answered leaves) and re-read now and then.
// An operator sees other requesters' waiting tasks too, read-only.
import type { Task } from "../../gen/synapse/v1/p2p_pb.js";
import { TaskState } from "../../gen/synapse/v1/payloads_pb.js";
import { WAITING_STATES } from "../protocol/state-machine.js";
import { clockTime, msOf, relative } from "./format.js";
import { questionPanel } from "./question.js";
import { taskHref } from "./router.js";
import { describeError, p2p, type Session } from "./rpc.js";
import type { SendOutcome } from "./steering.js";
import type { TaskModel } from "./task-model.js";
import type { WatchPool } from "./watch-pool.js";
import { el, note, show, stateBadge } from "./view.js";

const REFRESH_MS = 10_000;
const PAGE_SIZE = 100;

/**
 * Open a task by its id: ListTasks lists a requester's own tasks, so an
 * escalation contact asked to decide someone else's task opens it this way.
 */
function openById(): HTMLFormElement {
  const input = el("input", { id: "open-task-id", name: "task-id", autocomplete: "off", required: "", "data-testid": "open-task-id" });
  const form = el(
    "form",
    { class: "open-task", "data-testid": "open-task", "aria-labelledby": "open-task-title" },
    el("h3", { id: "open-task-title" }, "Asked to decide someone else's task?"),
    el("p", { class: "note" }, "An escalation contact is told the task's id by whoever escalated it; its requester's list does not reach you."),
    el("div", { class: "field" }, el("label", { for: input.id }, "Task id"), input),
    el("div", { class: "actions" }, el("button", { type: "submit", "data-testid": "open-task-submit" }, "Open")),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const id = input.value.trim();
    if (id) location.hash = taskHref(id);
  });
  return form;
}

export class Inbox {
  private readonly list = el("div", { class: "inbox-list", "data-testid": "inbox-list" });
  private readonly status = el("p", { class: "note", role: "status", "data-testid": "inbox-status" });
  /** The cards shown, by task id, with the question each shows. */
  private readonly cards = new Map<string, { card: HTMLElement; key: string }>();
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(
    container: HTMLElement,
    private readonly session: Session,
    private readonly model: TaskModel,
    private readonly pool: WatchPool,
    /** Told how many waiting tasks this identity may answer. */
    private readonly onCount: (count: number) => void,
  ) {
    show(
      container,
      el("p", { class: "lede" }, "Tasks waiting for an answer: information an agent needs, or a decision only a person may make."),
      this.list,
      this.status,
      openById(),
    );
    model.subscribe((task) => this.onTask(task));
  }

  start(): void {
    void this.read();
    this.timer ??= setInterval(() => void this.read(), REFRESH_MS);
  }

  async read(): Promise<void> {
    try {
      const response = await p2p.listTasks(
        { pageSize: PAGE_SIZE, states: [TaskState.INFO_NEEDED, TaskState.NEED_HUMAN, TaskState.HUMAN_DECIDING] },
        { headers: await this.session.authHeaders() },
      );
      const waiting = new Set(response.tasks.map((task) => task.taskId));
      for (const task of response.tasks) this.model.upsert(task);
      // A card the list no longer shows was answered (or ended) meanwhile.
      for (const id of [...this.cards.keys()]) if (!waiting.has(id)) this.remove(id);
      for (const task of response.tasks) this.put(this.model.get(task.taskId) ?? task);
      this.status.className = "note";
      this.status.textContent = response.nextPageToken ? `showing the newest ${PAGE_SIZE}` : `read ${clockTime(Date.now())}`;
    } catch (error) {
      this.status.className = "bad";
      this.status.textContent = `✗ ${describeError(error)}`;
    }
    this.settle();
  }

  private onTask(task: Task): void {
    if (WAITING_STATES.has(task.state)) this.put(task);
    else if (this.cards.has(task.taskId)) this.remove(task.taskId);
    else return;
    this.settle();
  }

  private answered = (outcome: SendOutcome): void => {
    if (outcome.task !== undefined) this.model.upsert(outcome.task);
  };

  /** Adds or redraws a task's card; one whose question is unchanged keeps what the user typed. */
  private put(task: Task): void {
    const key = `${task.state}:${task.pendingInfo ? "i" : ""}${task.pendingDecision?.decisionId ?? ""}`;
    const held = this.cards.get(task.taskId);
    if (held?.key === key) return;
    const question = questionPanel(this.session, task, this.answered);
    if (question === undefined) return; // waiting, but what it asks has not arrived yet
    const created = msOf(task.createdAt);
    const card = el(
      "article",
      { class: "card", "data-testid": "inbox-item", "data-task-id": task.taskId, "aria-label": `Task ${task.taskId}` },
      el(
        "header",
        {},
        el("a", { href: `#/tasks/${encodeURIComponent(task.taskId)}` }, el("code", {}, task.taskId)),
        " ",
        el("span", { class: "type" }, task.taskType),
        " ",
        stateBadge(task.state),
        el("small", { class: "meta" }, ` · asked ${relative(msOf(task.updatedAt))} · created ${clockTime(created)}`),
      ),
      question,
    );
    if (held !== undefined) {
      // Keep the card where it was (and focus where the user left it only if it still exists).
      held.card.replaceWith(card);
    } else {
      this.list.prepend(card);
    }
    this.cards.set(task.taskId, { card, key });
  }

  private remove(taskId: string): void {
    this.cards.get(taskId)?.card.remove();
    this.cards.delete(taskId);
  }

  private settle(): void {
    const ids = [...this.cards.keys()];
    this.pool.want("inbox", ids);
    // The count is of the questions this identity may answer (a decision escalated past it is not).
    const mine = ids.filter((id) => {
      const task = this.model.get(id);
      if (task === undefined) return false;
      return task.state === TaskState.INFO_NEEDED ? this.session.owns(task.requester?.agentId) : this.session.mayDecide(task);
    }).length;
    this.onCount(mine);
    const empty = this.list.querySelector("[data-testid=inbox-empty]");
    if (ids.length === 0 && empty === null) this.list.append(note("Nothing waits for you.", { "data-testid": "inbox-empty" }));
    if (ids.length > 0) empty?.remove();
  }
}
