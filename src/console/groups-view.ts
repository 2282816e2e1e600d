// The Groups view: the groups this identity is a party to at this host
// (ListGroups, newest first), beside the group open on the right. The list
// is read again every few seconds while it is shown, and at once when the
// open group's stream shows it changed.
import type { Group } from "../../gen/synapse/v1/group_pb.js";
import { clockTime, msOf } from "./format.js";
import { GroupDetail } from "./group-detail.js";
import { groupStatusWord, roleWord } from "./group-format.js";
import { badge } from "./group-panels.js";
import { groupHref } from "./router.js";
import { describeError, groupService, type Session } from "./rpc.js";
import { button, el, idCode, note, show } from "./view.js";

const REFRESH_MS = 10_000;
const PAGE_SIZE = 200;

export class GroupsView {
  private readonly rows = el("tbody", { "data-testid": "group-rows" });
  private readonly status = el("p", { class: "note", role: "status", "data-testid": "groups-status" });
  private readonly detail: GroupDetail;
  private readonly detailPane = el("div", { class: "detail-pane", "data-testid": "group-detail" });
  private selected: string | undefined;
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly container: HTMLElement,
    private readonly session: Session,
  ) {
    this.detail = new GroupDetail(
      this.detailPane,
      session,
      () => void this.read(),
      (groupId, sequence) => {
        const cell = this.rows.querySelector<HTMLElement>(`tr[data-group-id="${CSS.escape(groupId)}"] [data-testid="group-events"]`);
        if (cell && BigInt(cell.textContent || "0") < sequence) cell.textContent = String(sequence);
      },
    );
    show(
      container,
      el(
        "div",
        { class: "split" },
        el(
          "div",
          { class: "list-pane" },
          el("div", { class: "toolbar" }, el("h2", { id: "groups-title" }, "Groups"), button("Refresh", () => void this.read(), { "data-testid": "refresh-groups" })),
          el(
            "table",
            { "data-testid": "group-table" },
            el("caption", {}, "Groups you are a member of or invited to, newest first"),
            el("thead", {}, el("tr", {}, ...["Group", "Status", "Your role", "Members", "Events"].map((name) => el("th", { scope: "col" }, name)))),
            this.rows,
          ),
          this.status,
        ),
        this.detailPane,
      ),
    );
  }

  start(): void {
    void this.read();
    this.timer ??= setInterval(() => {
      if (this.container.offsetParent !== null) void this.read();
    }, REFRESH_MS);
  }

  /** Opens a group (or, with none, closes the open one and says what to do). */
  open(groupId: string | undefined): void {
    this.selected = groupId;
    if (groupId === undefined) {
      this.detail.close();
      show(this.detailPane, note("Choose a group to see its members, group tasks, votes and signed log."));
    } else this.detail.open(groupId);
    this.mark();
  }

  /** The page is elsewhere: its stream is a connection, give it back. */
  close(): void {
    this.detail.close();
    this.selected = undefined;
  }

  async read(): Promise<void> {
    try {
      const { groups, nextPageToken } = await groupService.listGroups({ pageSize: PAGE_SIZE }, { headers: await this.session.authHeaders() });
      show(this.rows, ...(groups.length > 0 ? groups.map((group) => this.row(group)) : [el("tr", {}, el("td", { colspan: "5" }, note("No groups yet: a coordinator has to invite this identity.")))]));
      this.mark();
      this.status.className = "note";
      this.status.textContent = `read ${clockTime(Date.now())}${nextPageToken ? ` · the newest ${PAGE_SIZE} shown` : ""}`;
    } catch (error) {
      this.status.className = "bad";
      this.status.textContent = `✗ ${describeError(error)}`;
    }
  }

  private row(group: Group): HTMLTableRowElement {
    const me = this.session.identity.agentId;
    const member = group.members.find((entry) => entry.agent?.agentId === me);
    const pending = group.pending.find((entry) => entry.agent?.agentId === me);
    const status = groupStatusWord(group.status);
    return el(
      "tr",
      { "data-testid": "group-row", "data-group-id": group.groupId, "data-status": status, title: `updated ${clockTime(msOf(group.updatedAt))}` },
      el("td", {}, el("a", { href: groupHref(group.groupId), title: group.groupId }, group.name || idCode(group.groupId)), group.name ? el("br") : "", group.name ? idCode(group.groupId) : ""),
      el("td", {}, badge(status, status === "active" ? "done" : "stopped")),
      el("td", {}, member ? roleWord(member.role) : pending ? `${roleWord(pending.role)} (pending)` : "—"),
      el("td", { class: "num" }, String(group.members.length)),
      el("td", { class: "num", "data-testid": "group-events" }, String(group.lastSequence)),
    );
  }

  /** Marks the open group's row for eyes and screen readers. */
  private mark(): void {
    for (const row of this.rows.querySelectorAll<HTMLElement>("tr[data-group-id]")) {
      if (row.dataset.groupId === this.selected) row.setAttribute("aria-current", "true");
      else row.removeAttribute("aria-current");
    }
  }
}
