// One group on its own page: who is in it (roles, weights), its group tasks
// and votes, and its signed log. Followed live with one WatchGroup stream
// from the first event: every event is verified against the host's key and
// listed as it arrives, and names what to read again (the members, a group
// task or a vote), so the page follows the group without polling.
import { Code, ConnectError } from "@connectrpc/connect";
import { GroupEventKind, type GroupEventPayload } from "../../gen/synapse/v1/a2n_pb.js";
import { GroupStatus, type Group, type GroupTask, type Vote } from "../../gen/synapse/v1/group_pb.js";
import { clockTime, msOf } from "./format.js";
import { groupStatusWord } from "./group-format.js";
import { GroupLog } from "./group-log.js";
import { badge, groupTaskPanel, membersTable, votePanel } from "./group-panels.js";
import { followGroup } from "./group-watch.js";
import { historyRow, historyTable } from "./history.js";
import { describeError, groupService, type Session } from "./rpc.js";
import { el, note, show } from "./view.js";

/** Bursts of events (a submit and its assignments, the last ballot and the count) are read once. */
const REFRESH_DELAY_MS = 80;

const MEMBERSHIP_KINDS = new Set([
  GroupEventKind.GROUP_CREATED,
  GroupEventKind.MEMBER_INVITED,
  GroupEventKind.JOIN_REQUESTED,
  GroupEventKind.MEMBER_ADDED,
  GroupEventKind.MEMBER_UPDATED,
  GroupEventKind.MEMBER_ROLE_CHANGED,
  GroupEventKind.MEMBER_LEFT,
  GroupEventKind.MEMBER_REMOVED,
  GroupEventKind.MEMBERSHIP_WITHDRAWN,
  GroupEventKind.GROUP_DISSOLVED,
]);
const VOTE_KINDS = new Set([GroupEventKind.VOTE_STARTED, GroupEventKind.BALLOT_CAST, GroupEventKind.VOTE_TALLIED]);

export class GroupDetail {
  private controller: AbortController | undefined;
  private groupId: string | undefined;
  private log: GroupLog | undefined;
  private readonly tasks = new Map<string, HTMLElement>();
  private readonly votes = new Map<string, HTMLElement>();
  private pending = { group: false, tasks: new Set<string>(), votes: new Set<string>() };
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** Reads overlap: an answer older than the one shown (by when it was asked) is dropped. */
  private asked = 0;
  private readonly shown = new Map<string, number>();

  /** Kept across redraws: focus moves here when a group is opened, and must stay. */
  private readonly title = el("h2", { id: "group-title", tabindex: "-1" });
  private readonly summary = el("div", { class: "task-summary", "data-testid": "group-summary" });
  private readonly stream = el("p", { class: "note stream-status", "data-testid": "group-stream-status", role: "status" });
  private readonly members = el("div", {});
  private readonly taskList = el("div", { "data-testid": "group-tasks" });
  private readonly voteList = el("div", { "data-testid": "group-votes" });
  private readonly verdict = el("p", { class: "note", "data-testid": "group-log-verdict" });
  private readonly history = historyTable("Signed group events, verified in this browser against the host's key");

  constructor(
    private readonly container: HTMLElement,
    private readonly session: Session,
    /** Called with the group as the host shows it, so the list stays in step. */
    private readonly onGroup: (group: Group) => void,
    /** Called with each event's sequence as it arrives: the list's event count. */
    private readonly onEvent: (groupId: string, sequence: bigint) => void,
  ) {}

  /** Shows a group and follows it until another is opened or the view closes. */
  open(groupId: string): void {
    if (groupId === this.groupId) return;
    this.close();
    this.groupId = groupId;
    this.log = new GroupLog(this.session.executor, groupId);
    this.tasks.clear();
    this.votes.clear();
    this.shown.clear();
    this.history.body.replaceChildren();
    show(this.title, "Group ", el("code", { "data-testid": "group-id" }, groupId));
    show(this.summary, note("loading…"));
    show(this.members);
    show(this.taskList, note("No group tasks yet."));
    show(this.voteList, note("No votes yet."));
    this.verdict.textContent = "";
    show(
      this.container,
      el("div", { class: "detail-head" }, el("div", { class: "title-row" }, this.title), this.summary, this.stream),
      el("section", { "aria-label": "Members" }, el("h3", {}, "Members"), this.members),
      el("section", { "aria-label": "Votes" }, el("h3", {}, "Votes"), this.voteList),
      el("section", { "aria-label": "Group tasks" }, el("h3", {}, "Group tasks"), this.taskList),
      el("section", { "aria-label": "Signed log" }, el("h3", {}, "Signed log"), this.verdict, this.history.table),
    );
    this.container.dataset.groupId = groupId;
    const controller = new AbortController();
    this.controller = controller;
    void this.start(groupId, controller.signal);
  }

  close(): void {
    this.controller?.abort();
    this.controller = undefined;
    this.groupId = undefined;
    clearTimeout(this.timer);
    this.pending = { group: false, tasks: new Set(), votes: new Set() };
  }

  private async start(groupId: string, signal: AbortSignal): Promise<void> {
    try {
      const { group, groupTaskIds, voteIds } = await groupService.getGroup({ groupId }, { headers: await this.session.authHeaders(), signal });
      if (signal.aborted) return;
      if (group) this.showGroup(group);
      for (const id of groupTaskIds) this.pending.tasks.add(id);
      for (const id of voteIds) this.pending.votes.add(id);
      await this.refresh(signal);
      this.stream.textContent = "following the group live";
      const log = this.log!;
      await followGroup(this.session, groupId, () => log.nextSequence, {
        snapshot: (snapshot) => {
          // Every stream, the first and each resumed one, opens with the group now.
          this.stream.textContent = "following the group live";
          this.showGroup(snapshot);
        },
        event: (sequence, envelope) => this.addEvent(log, sequence, envelope, signal),
        reconnecting: (from) => {
          this.stream.textContent = `connection lost; resuming from event ${from}…`;
        },
      }, signal);
      if (!signal.aborted) this.stream.textContent = "the host ended the stream (the group was dissolved, or you are no longer in it)";
    } catch (error) {
      if (signal.aborted) return;
      const missing = error instanceof ConnectError && error.code === Code.NotFound;
      const text = missing ? `${describeError(error)}: the group does not exist, or you are not one of its parties` : describeError(error);
      if (missing) show(this.summary, el("p", { class: "bad", "data-testid": "group-missing" }, text));
      else this.stream.textContent = `✗ ${text}`;
    }
  }

  private showGroup(group: Group): void {
    const host = group.host?.agentId ?? "";
    const dissolved = group.status === GroupStatus.DISSOLVED;
    show(
      this.summary,
      el("p", {}, el("strong", { "data-testid": "group-name" }, group.name || group.groupId), group.description ? ` · ${group.description}` : ""),
      el(
        "p",
        { class: "note" },
        badge(groupStatusWord(group.status), dissolved ? "stopped" : "done", { "data-testid": "group-status" }),
        ` · hosted by `,
        el("code", {}, host),
        host === this.session.executor.agentId ? "" : " (not this agent: its log cannot be checked here)",
        ` · created ${clockTime(msOf(group.createdAt))} by `,
        el("code", {}, group.createdBy?.agentId ?? ""),
      ),
    );
    show(this.members, membersTable(group, this.session.identity.agentId));
    this.onGroup(group);
  }

  private addEvent(log: GroupLog, sequence: bigint, envelope: Parameters<GroupLog["add"]>[1], signal: AbortSignal): void {
    const added = log.add(sequence, envelope);
    if (added === undefined) return;
    const previous = log.entries[log.entries.length - 2]?.sentAtMs;
    this.history.body.append(historyRow(added.entry, previous));
    this.verdict.dataset.allVerified = String(log.allVerified);
    this.verdict.className = log.allVerified ? "ok" : "bad";
    this.verdict.textContent = log.allVerified
      ? `✓ ${log.entries.length === 1 ? "the 1 event verifies" : `all ${log.entries.length} events verify`}: signed by the host, addressed to this group, numbered without gaps`
      : `✗ event ${log.broken?.sequence ?? "?"} does not verify: ${log.broken?.reason ?? "see below"}`;
    if (added.payload) this.schedule(added.payload, signal);
    this.onEvent(log.groupId, sequence);
  }

  /** Notes what an event changed, and reads it again shortly (once per burst). */
  private schedule(event: GroupEventPayload, signal: AbortSignal): void {
    if (MEMBERSHIP_KINDS.has(event.kind)) this.pending.group = true;
    else if (VOTE_KINDS.has(event.kind)) this.pending.votes.add(event.subjectId);
    else {
      const taskId = event.subtask?.groupTaskId || event.subjectId;
      if (taskId) this.pending.tasks.add(taskId);
    }
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.refresh(signal), REFRESH_DELAY_MS);
  }

  private async refresh(signal: AbortSignal): Promise<void> {
    const groupId = this.groupId;
    if (groupId === undefined || signal.aborted) return;
    const { group, tasks, votes } = this.pending;
    this.pending = { group: false, tasks: new Set(), votes: new Set() };
    const asked = ++this.asked;
    const fresh = (key: string) => {
      if (signal.aborted || (this.shown.get(key) ?? 0) > asked) return false;
      this.shown.set(key, asked);
      return true;
    };
    try {
      const headers = await this.session.authHeaders();
      const reads: Promise<unknown>[] = [];
      if (group) reads.push(groupService.getGroup({ groupId }, { headers, signal }).then(({ group: read }) => read && fresh("group") && this.showGroup(read)));
      for (const id of tasks) reads.push(groupService.getGroupTask({ groupId, groupTaskId: id }, { headers, signal }).then(({ groupTask }) => groupTask && fresh(`task:${id}`) && this.showTask(groupTask)));
      for (const id of votes) reads.push(groupService.getVote({ groupId, voteId: id }, { headers, signal }).then(({ vote }) => vote && fresh(`vote:${id}`) && this.showVote(vote)));
      await Promise.all(reads);
    } catch (error) {
      if (!signal.aborted) this.stream.textContent = `✗ ${describeError(error)}`;
    }
  }

  private showTask(task: GroupTask): void {
    replaceIn(this.taskList, this.tasks, task.groupTaskId, groupTaskPanel(task));
  }

  private showVote(vote: Vote): void {
    replaceIn(this.voteList, this.votes, vote.voteId, votePanel(vote));
  }
}

/** Puts a panel in its place in a list (or at the end when it is new). */
function replaceIn(list: HTMLElement, panels: Map<string, HTMLElement>, id: string, panel: HTMLElement): void {
  const old = panels.get(id);
  if (old?.isConnected) old.replaceWith(panel);
  else {
    if (panels.size === 0) list.replaceChildren();
    list.append(panel);
  }
  panels.set(id, panel);
}
