// The task list: ListTasks pages (newest first) filtered by state and task
// type, each row kept current by the Watch streams of the pool (and by the
// task page's own stream), re-read now and then for tasks submitted
// elsewhere. For an operator's key the agent lists every requester's tasks;
// the rows say whose each is.
import type { Task } from "../../gen/synapse/v1/p2p_pb.js";
import { TaskState } from "../../gen/synapse/v1/payloads_pb.js";
import { isTerminal } from "../protocol/state-machine.js";
import { clockTime, msOf, relative } from "./format.js";
import { describeError, p2p, type Session } from "./rpc.js";
import type { TaskModel } from "./task-model.js";
import type { WatchPool } from "./watch-pool.js";
import { button, el, idCode, note, show, stateBadge, stateName } from "./view.js";

const S = TaskState;
export const PAGE_SIZE = 20;
/** How often the page is read again, for tasks the streams do not cover. */
const REFRESH_MS = 10_000;

/** State filters: groups first, then each state. */
const STATE_FILTERS: Array<[string, string, TaskState[]]> = [
  ["", "any state", []],
  ["working", "working", [S.PENDING, S.CONFIRMED, S.EXECUTING, S.INFO_PROVIDED, S.HUMAN_APPROVED, S.HUMAN_REJECTED]],
  ["waiting", "waiting for an answer", [S.INFO_NEEDED, S.NEED_HUMAN, S.HUMAN_DECIDING]],
  ["finished", "finished", [S.COMPLETED, S.FAILED, S.CANCELLED, S.REJECTED]],
  ...[S.PENDING, S.CONFIRMED, S.EXECUTING, S.INFO_NEEDED, S.INFO_PROVIDED, S.NEED_HUMAN, S.HUMAN_DECIDING, S.HUMAN_APPROVED, S.HUMAN_REJECTED, S.COMPLETED, S.FAILED, S.CANCELLED, S.REJECTED].map(
    (state): [string, string, TaskState[]] => [stateName(state), stateName(state), [state]],
  ),
];

export class TaskList {
  private readonly stateSelect = el("select", { id: "filter-state", "data-testid": "filter-state" });
  private readonly typeSelect = el("select", { id: "filter-type", "data-testid": "filter-type" });
  private readonly body = el("tbody", { "data-testid": "task-rows" });
  private readonly status = el("p", { class: "note", role: "status", "data-testid": "list-status" });
  private readonly newer = button("← Newer", () => this.turn(-1), { "data-testid": "page-newer" });
  private readonly older = button("Older →", () => this.turn(1), { "data-testid": "page-older" });
  private readonly pageLabel = el("span", { class: "page-label", "data-testid": "page-label" });
  private readonly operatorNote = el(
    "p",
    { class: "note operator", "data-testid": "operator-note", hidden: "" },
    "Operator view: this key may read every requester's tasks. Tasks of other requesters are read-only: only their requester steers them.",
  );
  /** The page tokens of the pages shown so far: tokens[i] reads page i. */
  private tokens: string[] = [""];
  private page = 0;
  private nextToken = "";
  private shown: string[] = [];
  private selected: string | undefined;
  private timer: ReturnType<typeof setInterval> | undefined;
  private reading = 0;

  constructor(
    private readonly container: HTMLElement,
    private readonly session: Session,
    private readonly model: TaskModel,
    private readonly pool: WatchPool,
  ) {
    for (const [value, label] of STATE_FILTERS) this.stateSelect.append(el("option", { value }, label));
    this.typeSelect.append(el("option", { value: "" }, "any type"));
    for (const taskType of session.capabilities.supportedTaskTypes) this.typeSelect.append(el("option", { value: taskType.type }, taskType.type));
    const filters = el(
      "form",
      { class: "filters", "aria-label": "Filter tasks", "data-testid": "task-filters" },
      el("label", { for: this.stateSelect.id }, "State"),
      this.stateSelect,
      el("label", { for: this.typeSelect.id }, "Type"),
      this.typeSelect,
      button("Refresh", () => void this.read(), { "data-testid": "refresh-tasks" }),
    );
    filters.addEventListener("submit", (event) => event.preventDefault());
    for (const select of [this.stateSelect, this.typeSelect]) select.addEventListener("change", () => this.restart());
    const table = el(
      "table",
      { class: "tasks", "data-testid": "task-table" },
      el("caption", { class: "visually-hidden" }, "Tasks, newest first"),
      el("thead", {}, el("tr", {}, ...["Task", "Type", "State", "Progress", "Requester", "Updated"].map((name) => el("th", { scope: "col" }, name)))),
      this.body,
    );
    show(container, filters, this.operatorNote, table, el("nav", { class: "pager", "aria-label": "Pages" }, this.newer, this.pageLabel, this.older), this.status);
    model.subscribe((task) => this.onTask(task));
  }

  /** Starts reading (and re-reading) the list. */
  start(): void {
    void this.read();
    this.timer ??= setInterval(() => {
      if (this.container.offsetParent !== null) void this.read();
    }, REFRESH_MS);
  }

  /** Highlights the task open on its page. */
  select(taskId: string | undefined): void {
    this.selected = taskId;
    for (const row of this.body.querySelectorAll<HTMLTableRowElement>("tr[data-task-id]")) {
      if (row.dataset.taskId === taskId) row.setAttribute("aria-current", "true");
      else row.removeAttribute("aria-current");
    }
  }

  private filters(): { states: TaskState[]; taskTypes: string[] } {
    const states = STATE_FILTERS.find(([value]) => value === this.stateSelect.value)?.[2] ?? [];
    return { states, taskTypes: this.typeSelect.value ? [this.typeSelect.value] : [] };
  }

  /** New filters: back to the first page (a page token belongs to the filters it was issued for). */
  private restart(): void {
    this.tokens = [""];
    this.page = 0;
    void this.read();
  }

  private turn(step: number): void {
    if (step > 0 && this.nextToken) {
      this.tokens[this.page + 1] = this.nextToken;
      this.page++;
    } else if (step < 0 && this.page > 0) {
      this.page--;
    } else return;
    void this.read();
  }

  /** Reads the current page. */
  async read(): Promise<void> {
    const ticket = ++this.reading;
    try {
      const { states, taskTypes } = this.filters();
      const response = await p2p.listTasks({ pageSize: PAGE_SIZE, pageToken: this.tokens[this.page] ?? "", states, taskTypes }, { headers: await this.session.authHeaders() });
      if (ticket !== this.reading) return; // a newer read is under way
      for (const task of response.tasks) this.model.upsert(task);
      this.shown = response.tasks.map((task) => task.taskId);
      this.nextToken = response.nextPageToken;
      this.draw();
      this.status.className = "note";
      this.status.textContent = `read ${clockTime(Date.now())}`;
    } catch (error) {
      if (ticket !== this.reading) return;
      this.status.className = "bad";
      this.status.textContent = `✗ ${describeError(error)}`;
    }
  }

  private draw(): void {
    this.pool.want("list", this.shown);
    const rows = this.shown.map((id) => this.model.get(id)).filter((task): task is Task => task !== undefined).map((task) => this.row(task));
    if (rows.length === 0) show(this.body, el("tr", {}, el("td", { colspan: "6", class: "empty" }, this.emptyNote())));
    else show(this.body, ...rows);
    this.newer.disabled = this.page === 0;
    this.older.disabled = this.nextToken === "";
    this.pageLabel.textContent = `page ${this.page + 1}`;
    this.select(this.selected);
    const others = this.shown.filter((id) => !this.session.owns(this.model.get(id)?.requester?.agentId)).length;
    this.operatorNote.hidden = others === 0;
  }

  /** Why the list is empty, and, for a first look, where the tasks sent from the command line are. */
  private emptyNote(): HTMLElement {
    if (this.page > 0) return note("No tasks on this page.");
    const { states, taskTypes } = this.filters();
    if (states.length > 0 || taskTypes.length > 0) return note("No tasks match these filters.");
    return el(
      "div",
      { class: "note", "data-testid": "no-tasks" },
      el("p", {}, "No tasks yet for this identity: ", el("a", { href: "#/new" }, "submit one"), "."),
      el(
        "p",
        {},
        "Tasks sent with the ",
        el("code", {}, "synapse"),
        " command line are signed with its own key and listed for it, not for this browser's key. To see them here, import that key (",
        el("code", {}, "~/.synapse/agent.key"),
        ", or ",
        el("code", {}, "$SYNAPSE_HOME/agent.key"),
        ") under ",
        el("a", { href: "#/identity" }, "Identity"),
        ".",
      ),
    );
  }

  private row(task: Task): HTMLTableRowElement {
    const mine = this.session.owns(task.requester?.agentId);
    const updated = msOf(task.updatedAt);
    const live = this.pool.following().includes(task.taskId);
    return el(
      "tr",
      { "data-task-id": task.taskId, "data-state": stateName(task.state), "data-testid": "task-row", class: mine ? "" : "foreign" },
      el("td", {}, el("a", { href: `#/tasks/${encodeURIComponent(task.taskId)}` }, idCode(task.taskId, { "data-testid": "row-task-id" }))),
      el("td", {}, task.taskType),
      el("td", {}, stateBadge(task.state), live && !isTerminal(task.state) ? el("span", { class: "live", title: "followed live" }, " ●") : ""),
      el("td", { class: "num" }, el("progress", { max: "100", value: String(task.progress), "aria-label": `${task.progress}%` })),
      el("td", {}, mine ? "you" : idCode(task.requester?.agentId ?? "?")),
      el("td", { title: clockTime(updated) }, relative(updated)),
    );
  }

  private onTask(task: Task): void {
    if (!this.shown.includes(task.taskId)) return;
    const old = this.body.querySelector(`tr[data-task-id="${CSS.escape(task.taskId)}"]`);
    if (old === null) return;
    const fresh = this.row(task);
    if (task.taskId === this.selected) fresh.setAttribute("aria-current", "true");
    const focused = old.contains(document.activeElement);
    old.replaceWith(fresh);
    if (focused) fresh.querySelector("a")?.focus();
    // A task that ended frees its stream for another.
    if (isTerminal(task.state)) this.pool.want("list", this.shown);
  }
}
