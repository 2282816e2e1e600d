// The parts of a group's page: its members (roles, weights, endpoints) and
// pending memberships, each group task (strategy, state, the sub-task at
// every member, the outputs) and each vote (question, options, rule, a
// countdown to its deadline, the count and its winner). Read-only views of
// what GetGroup, GetGroupTask and GetVote return.
import { toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { PendingKind, VoteState, type Group, type GroupTask, type Vote } from "../../gen/synapse/v1/group_pb.js";
import { GroupRole, GroupTaskState, VoteOutcome } from "../../gen/synapse/v1/a2n_pb.js";
import { clockTime, jsonInline, msOf } from "./format.js";
import { closeReasonWord, groupTaskStateWord, outcomeLine, roleWord, ruleWord, strategyWord, voteStateWord, word } from "./group-format.js";
import { deadlineCountdown } from "./question.js";
import { el, idCode, note, stateBadge } from "./view.js";

type Tone = "working" | "waiting" | "done" | "failed" | "stopped";

export function badge(text: string, tone: Tone, attributes: Record<string, string> = {}): HTMLElement {
  return el("span", { class: `badge tone-${tone}`, ...attributes }, text);
}

function groupTaskStateBadge(state: GroupTaskState): HTMLElement {
  const name = groupTaskStateWord(state);
  const tone: Tone = state === GroupTaskState.COMPLETED ? "done" : state === GroupTaskState.FAILED ? "failed" : state === GroupTaskState.WAITING ? "waiting" : state === GroupTaskState.CANCELLED ? "stopped" : "working";
  return badge(name, tone, { "data-testid": "group-task-state", "data-state": name });
}

function table(caption: string, headings: string[], rows: HTMLTableRowElement[], testId: string, empty: string): HTMLTableElement {
  const body = rows.length > 0 ? rows : [el("tr", {}, el("td", { colspan: String(headings.length) }, note(empty)))];
  return el(
    "table",
    { "data-testid": testId },
    el("caption", {}, caption),
    el("thead", {}, el("tr", {}, ...headings.map((name) => el("th", { scope: "col" }, name)))),
    el("tbody", {}, ...body),
  );
}

/** The members in the order they joined, then the memberships waiting for a second signature. */
export function membersTable(group: Group, me: string): HTMLElement {
  const rows = group.members.map((member) => {
    const agentId = member.agent?.agentId ?? "";
    const role = roleWord(member.role);
    return el(
      "tr",
      { "data-testid": "group-member", "data-agent-id": agentId, "data-role": role, "data-weight": String(member.weight) },
      el("td", {}, el("code", { title: `key ${member.agent?.keyId ?? ""}` }, agentId), agentId === me ? el("strong", {}, " (you)") : ""),
      el("td", {}, badge(role, member.role === GroupRole.COORDINATOR ? "done" : member.role === GroupRole.OBSERVER ? "stopped" : "working")),
      el("td", { class: "num" }, String(member.weight)),
      el("td", {}, member.endpointUrl ? el("code", {}, member.endpointUrl) : note("takes no sub-tasks")),
      el("td", {}, clockTime(msOf(member.joinedAt))),
    );
  });
  const pending = group.pending.map((entry) =>
    el(
      "tr",
      { "data-testid": "group-pending", "data-agent-id": entry.agent?.agentId ?? "", class: "foreign" },
      el("td", {}, el("code", {}, entry.agent?.agentId ?? "")),
      el("td", {}, badge(roleWord(entry.role), "waiting")),
      el("td", { class: "num" }, entry.weight ? String(entry.weight) : "—"),
      el("td", {}, entry.kind === PendingKind.INVITATION ? "invited, not yet accepted" : "asked to join, not yet approved (its role is a wish: the approval names the role granted)"),
      el("td", {}, entry.expiresAt ? `until ${clockTime(msOf(entry.expiresAt))}` : ""),
    ),
  );
  return table("Members, in the order they joined: each signed its own consent", ["Agent", "Role", "Weight", "Endpoint", "Joined"], [...rows, ...pending], "group-members", "No members.");
}

/** One group task: what was asked, how it was dealt, each sub-task at its member, the outputs. */
export function groupTaskPanel(task: GroupTask): HTMLElement {
  const subtasks = task.subtasks.map((subtask) => {
    const ref = subtask.ref;
    return el(
      "tr",
      { "data-testid": "subtask", "data-agent-id": ref?.agentId ?? "", "data-subtask-id": ref?.subtaskId ?? "" },
      el("td", {}, el("code", {}, ref?.agentId ?? "")),
      el("td", { class: "num" }, `${ref?.slot ?? 0} · ${ref?.attempt ?? 0}`),
      el("td", {}, stateBadge(subtask.state)),
      // A finished sub-task's last progress report says nothing more than its state.
      el("td", { class: "num" }, subtask.finished ? "—" : el("progress", { max: "100", value: String(subtask.progress), "aria-label": `${subtask.progress}%` })),
      el("td", {}, subtask.lostReason ? `lost: ${subtask.lostReason}` : subtask.statusMessage),
    );
  });
  const outputs = task.outputs.map((output) =>
    el(
      "tr",
      { "data-testid": "member-output", "data-agent-id": output.agentId },
      el("td", {}, el("code", {}, output.agentId)),
      el("td", { class: "num" }, String(output.slot)),
      el("td", {}, el("code", { class: "json-inline" }, output.output ? jsonInline(toJson(ValueSchema, output.output)) : "")),
    ),
  );
  return el(
    "article",
    { class: "group-item", "data-testid": "group-task", "data-group-task-id": task.groupTaskId },
    el(
      "h4",
      {},
      idCode(task.groupTaskId),
      ` ${task.taskType} · ${strategyWord(task.strategy)} · `,
      groupTaskStateBadge(task.state),
      ` ${task.completed} of ${task.required} done`,
    ),
    task.reason ? el("p", { class: "note" }, task.reason) : "",
    table("Sub-tasks: one P2P task per member and attempt", ["Member", "Slot · attempt", "State", "Progress", "Status"], subtasks, "subtasks", "None assigned yet."),
    task.outputs.length > 0 ? table("Outputs, each signed by its member", ["Member", "Slot", "Output"], outputs, "member-outputs", "") : "",
  );
}

/** One vote: the question and its terms, a live countdown while open, and the count (interim until it closes). */
export function votePanel(vote: Vote): HTMLElement {
  const tally = vote.tally;
  const open = vote.state === VoteState.OPEN;
  const deadline = msOf(vote.deadline);
  const counts = (tally?.counts ?? []).map((count) =>
    el(
      "tr",
      { "data-testid": "vote-count", "data-option": count.option, class: tally?.winner === count.option ? "winner" : "" },
      el("td", {}, count.option, tally?.winner === count.option ? el("strong", {}, " ✓ winner") : ""),
      el("td", { class: "num" }, String(count.votes)),
      el("td", {}, el("meter", { min: "0", max: String(Number(tally?.counted ?? 0n) || 1), value: String(count.votes), "aria-label": `${count.votes} for ${count.option}` })),
    ),
  );
  const outcome = tally ? word(VoteOutcome, tally.outcome, "") : "none";
  return el(
    "article",
    { class: "group-item", "data-testid": "vote", "data-vote-id": vote.voteId, "data-state": voteStateWord(vote.state), "data-outcome": outcome, "data-final": String(tally?.final ?? false) },
    el("h4", {}, el("span", { "data-testid": "vote-question" }, vote.question || vote.voteId), " · ", badge(voteStateWord(vote.state), open ? "working" : "done")),
    el(
      "p",
      { class: "note" },
      `${ruleWord(vote.rule)} · options ${vote.options.join(", ")} · started by `,
      el("code", {}, vote.startedBy?.agentId ?? ""),
      " · deadline ",
      clockTime(deadline),
      " ",
      open && deadline !== undefined ? deadlineCountdown(deadline) : vote.closedAt ? `closed ${clockTime(msOf(vote.closedAt))} (${closeReasonWord(tally?.closedReason ?? 0)})` : "",
    ),
    table(tally?.final ? "Final count" : "Interim count: as if the vote closed now", ["Option", "Votes", ""], counts, "vote-counts", "No count yet."),
    tally
      ? el(
          "p",
          { "data-testid": "vote-outcome" },
          el("strong", {}, outcomeLine(tally)),
          tally.winner ? el("span", { "data-testid": "vote-winner", hidden: "" }, tally.winner) : "",
          ` · ${tally.ballots} of ${tally.eligible} voted (quorum ${tally.quorum})${tally.abstentions ? `, ${tally.abstentions} abstained` : ""}`,
        )
      : "",
  );
}
