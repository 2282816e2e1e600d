// The README's groups walkthrough as a user types it: three agents on one
// machine, a group at the first, members who accept with their own keys (or
// ask and are approved), broadcast, shard and quorum group tasks, a question
// answered at the group task, a ranked vote, the signed log, leave and
// dissolve; each command's --json and exit status.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli, startServe, type ServeProcess } from "./helpers/cli.js";
import { tempDir } from "./helpers/server.js";

let agents: ServeProcess[];
let dirs: string[];
let env: NodeJS.ProcessEnv;
let H: string;
let TWO: string;
let THREE: string;

beforeAll(async () => {
  dirs = await Promise.all([0, 1, 2].map(() => tempDir("synapse-walkthrough-")));
  agents = await Promise.all(dirs.map((dir) => startServe(["--data-dir", dir], { SYNAPSE_LOG_LEVEL: "warn" })));
  [H, TWO, THREE] = agents.map((agent) => agent.url) as [string, string, string];
  env = { SYNAPSE_HOME: await tempDir("synapse-cli-home-") };
}, 30_000);
afterAll(async () => {
  for (const agent of agents) {
    const code = await agent.stop();
    if (code !== 0) console.log(agent.stderr().slice(-3000));
    expect(code).toBe(0);
  }
});

const cli = (...args: string[]) => runCli(args, { env });
const json = <T = Record<string, unknown>>(stdout: string) => JSON.parse(stdout) as T;

describe("groups walkthrough", () => {
  it("creates a group and adds members only with their own signatures", async () => {
    const created = await cli("group", "create", H, "team", "--name", "Three agents", "--json");
    expect(created.code).toBe(0);
    expect(json(created.stdout)).toMatchObject({ reply: { sequence: 1, payload: { kind: "GROUP_EVENT_KIND_GROUP_CREATED" } }, group: { groupId: "team", name: "Three agents" } });

    expect((await cli("group", "add", H, "team", "--agent-url", H)).code).toBe(0);
    const one = await cli("group", "join", H, "team", "--accept", "--endpoint", H, "--home", dirs[0]!, "--json");
    expect(one.code).toBe(0);
    expect(json(one.stdout)).toMatchObject({ reply: { payload: { kind: "GROUP_EVENT_KIND_MEMBER_ADDED", member: { role: "GROUP_ROLE_MEMBER", endpointUrl: H } } } });
    expect((await cli("group", "add", H, "team", "--agent-url", TWO, "--weight", "2")).code).toBe(0);
    expect((await cli("group", "join", H, "team", "--accept", "--endpoint", TWO, "--home", dirs[1]!)).code).toBe(0);

    const asked = await cli("group", "join", H, "team", "--endpoint", THREE, "--home", dirs[2]!);
    expect(asked.code).toBe(0);
    expect(asked.stdout).toContain("asked to join; a coordinator approves with: synapse group add");
    // Agent three cannot accept an invitation that is not there, nor approve itself.
    const self = await cli("group", "add", H, "team", "--agent-url", THREE, "--home", dirs[2]!);
    expect(self.code).toBe(1);
    expect(self.stderr).toMatch(/not_found|no group/);
    expect((await cli("group", "add", H, "team", "--agent-url", THREE)).code).toBe(0);

    const shown = await cli("group", "show", H, "team", "--json");
    const members = json<{ group: { members: Array<{ role: string; weight: number; endpointUrl?: string }> } }>(shown.stdout).group;
    expect(members.members.map((m) => [m.role, m.weight, m.endpointUrl ?? ""])).toEqual([
      ["GROUP_ROLE_COORDINATOR", 1, ""],
      ["GROUP_ROLE_MEMBER", 1, H],
      ["GROUP_ROLE_MEMBER", 2, TWO],
      ["GROUP_ROLE_MEMBER", 1, THREE],
    ]);
    const text = await cli("group", "show", H, "team");
    expect(text.stdout).toContain("group team (Three agents): active");
    expect((await cli("group", "list", H)).stdout).toContain("team (Three agents): 4 members, active");
  });

  it("runs broadcast, shard and quorum group tasks at the members", async () => {
    const broadcast = await cli("group", "task", H, "team", "--type", "text_analysis", "--payload", '{"text":"Agents talk. They sign."}', "--wait", "--json");
    expect(broadcast.code).toBe(0);
    const task = json<{ groupTask: { state: string; outputs: Array<{ taskComplete: { envelope: { signature: { value: string } } } }> } }>(broadcast.stdout).groupTask;
    expect(task.state).toBe("GROUP_TASK_STATE_COMPLETED");
    expect(task.outputs).toHaveLength(3);
    expect(task.outputs.every((output) => output.taskComplete.envelope.signature.value.length > 80)).toBe(true);

    const shard = await cli("group", "task", H, "team", "--type", "data_analysis", "--shards", '[{"csv":"n\\n1\\n2"},{"csv":"n\\n3\\n4"},{"csv":"n\\n5"}]', "--wait");
    expect(shard.code).toBe(0);
    expect(shard.stdout).toMatch(/\(data_analysis, shard\): completed, 3 of 3 done/);
    const quorum = await cli("group", "task", H, "team", "--type", "text_analysis", "--payload", '{"text":"Two will do."}', "--strategy", "quorum", "--quorum", "2", "--wait");
    expect(quorum.code).toBe(0);
    expect(quorum.stdout).toMatch(/\(text_analysis, quorum\): completed, 2 of 2 done/);
  });

  it("surfaces a member's question at the group task (exit 3) and forwards the answer", async () => {
    const asked = await cli("group", "task", H, "team", "--type", "summarization", "--payload", '{"text":"One. Two. Three."}', "--member", TWO, "--task-id", "sum", "--wait");
    expect(asked.code).toBe(3);
    expect(asked.stdout).toContain("needs information");
    const answered = await cli("group", "task", H, "team", "--task-id", "sum", "--answer", "sum.0.1", "--set", "max_sentences=2", "--wait");
    expect(answered.code).toBe(0);
    expect(answered.stdout).toContain('"summary":"One. Two."');
    const shown = await cli("group", "task", H, "team", "--task-id", "sum", "--json");
    expect(json(shown.stdout)).toMatchObject({ groupTask: { groupTaskId: "sum", state: "GROUP_TASK_STATE_COMPLETED" } });
  });

  it("counts a ranked vote of signed ballots", async () => {
    const started = await cli("vote", "start", H, "team", "--vote-id", "lunch", "--question", "Lunch?", "--option", "pizza", "--option", "sushi", "--option", "salad", "--rule", "ranked");
    expect(started.code).toBe(3); // open
    expect((await cli("vote", "cast", H, "team", "lunch", "--rank", "sushi,pizza")).code).toBe(3);
    expect((await cli("vote", "cast", H, "team", "lunch", "--rank", "salad,pizza", "--home", dirs[0]!)).code).toBe(3);
    expect((await cli("vote", "cast", H, "team", "lunch", "--rank", "pizza", "--home", dirs[1]!)).code).toBe(3);
    const last = await cli("vote", "cast", H, "team", "lunch", "--rank", "pizza,sushi", "--home", dirs[2]!);
    expect(last.code).toBe(0);
    expect(last.stdout).toContain("round 1: pizza 2, sushi 1, salad 1; eliminated salad");
    const again = await cli("vote", "cast", H, "team", "lunch", "--choice", "pizza");
    expect(again.code).toBe(1);
    const tally = await cli("vote", "tally", H, "team", "lunch", "--json");
    expect(tally.code).toBe(0);
    expect(json(tally.stdout)).toMatchObject({ tally: { outcome: "VOTE_OUTCOME_DECIDED", winner: "pizza", final: true, ballots: 4 }, summary: expect.stringContaining("decided: pizza") });
    expect((await cli("vote", "tally", H, "team", "lunch")).stdout).toMatch(/ballot \S+ from agent_\w+: salad > pizza/);
  });

  it("shows the signed log, then a member leaves and the group is dissolved", async () => {
    const log = await cli("group", "watch", H, "team", "--json");
    expect(log.code).toBe(0);
    const events = log.stdout.trim().split("\n").map((line) => JSON.parse(line) as { sequence: number; payload: { kind: string } });
    expect(events.map((event) => event.sequence)).toEqual(events.map((_, index) => index + 1));
    expect(events.at(-1)?.payload.kind).toBe("GROUP_EVENT_KIND_VOTE_TALLIED");
    expect((await cli("group", "watch", H, "team", "--from", "5")).stdout.split("\n")[0]).toMatch(/^#5 /);
    expect((await cli("group", "leave", H, "team", "--home", dirs[2]!)).code).toBe(0);
    const dissolved = await cli("group", "dissolve", H, "team", "--json");
    expect(json(dissolved.stdout)).toMatchObject({ group: { status: "GROUP_STATUS_DISSOLVED" } });
    const refused = await cli("group", "leave", H, "team", "--home", dirs[1]!);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("illegal_transition");
  });

  it("grants a role only when the approver names it, and changes roles only at a coordinator's word", async () => {
    const created = json<{ group: { createdBy: { agentId: string } } }>((await cli("group", "create", H, "guild", "--json")).stdout);
    const creator = created.group.createdBy.agentId;
    // The README's takeover: agent two asks to be coordinator and the creator approves with a plain `add`.
    const asked = await cli("group", "join", H, "guild", "--role", "coordinator", "--endpoint", TWO, "--home", dirs[1]!, "--json");
    const two = json<{ reply: { payload: { member: { agent: { agentId: string } } } } }>(asked.stdout).reply.payload.member.agent.agentId;
    expect((await cli("group", "show", H, "guild")).stdout).toMatch(new RegExp(`asks to join +${two} as coordinator`));
    const added = await cli("group", "add", H, "guild", "--agent-url", TWO, "--json");
    expect(added.code).toBe(0);
    expect(added.stderr).toContain(`${two} asked to join as coordinator; granting member; to grant it: pass --role coordinator`);
    expect(json(added.stdout)).toMatchObject({ reply: { payload: { kind: "GROUP_EVENT_KIND_MEMBER_ADDED", member: { role: "GROUP_ROLE_MEMBER" } } } });
    const takeover = await cli("group", "remove", H, "guild", creator, "--home", dirs[1]!);
    expect(takeover.code).toBe(1);
    expect(takeover.stderr).toContain("permission_denied");
    expect(takeover.stderr).toContain("only a coordinator may remove members");
    expect((await cli("group", "show", H, "guild")).code).toBe(0);

    // Agent three asks the same and is granted it, because the approval says so.
    const three = json<{ reply: { header: { replyTo: string }; payload: { member: { agent: { agentId: string } } } } }>(
      (await cli("group", "join", H, "guild", "--role", "coordinator", "--home", dirs[2]!, "--json")).stdout,
    ).reply;
    const granted = await cli("group", "add", H, "guild", "--approve", three.header.replyTo, "--role", "coordinator", "--json");
    expect(granted.stderr).toBe("");
    expect(json(granted.stdout)).toMatchObject({ reply: { payload: { member: { role: "GROUP_ROLE_COORDINATOR" } } } });

    // Role changes: refused from a member, done by a coordinator, --role required.
    const byMember = await cli("group", "role", H, "guild", three.payload.member.agent.agentId, "--role", "observer", "--home", dirs[1]!);
    expect(byMember.code).toBe(1);
    expect(byMember.stderr).toContain("only a coordinator may change roles");
    const changed = await cli("group", "role", H, "guild", two, "--role", "coordinator", "--weight", "5", "--home", dirs[2]!, "--json");
    expect(changed.code).toBe(0);
    expect(json(changed.stdout)).toMatchObject({ reply: { payload: { kind: "GROUP_EVENT_KIND_MEMBER_ROLE_CHANGED", member: { role: "GROUP_ROLE_COORDINATOR", weight: 5 } } } });
    expect((await cli("group", "role", H, "guild", two)).code).toBe(2);
    expect((await cli("group", "role", H, "guild", two, "--role", "boss")).code).toBe(2);

    // The log, every event verified against the host's key, tells the same story.
    const log = await cli("group", "watch", H, "guild", "--json");
    expect(log.code).toBe(0);
    const kinds = log.stdout.trim().split("\n").map((line) => JSON.parse(line) as { payload: { kind: string; member?: { role?: string } } }).map((e) => `${e.payload.kind.replace("GROUP_EVENT_KIND_", "")} ${e.payload.member?.role?.replace("GROUP_ROLE_", "") ?? ""}`);
    expect(kinds).toEqual(["GROUP_CREATED COORDINATOR", "JOIN_REQUESTED COORDINATOR", "MEMBER_ADDED MEMBER", "JOIN_REQUESTED COORDINATOR", "MEMBER_ADDED COORDINATOR", "MEMBER_ROLE_CHANGED COORDINATOR"]);
    expect((await cli("group", "dissolve", H, "guild")).code).toBe(0);
  });

  it("answers usage errors with exit status 2", async () => {
    expect((await cli("group")).code).toBe(2);
    expect((await cli("group", "frobnicate", H, "team")).code).toBe(2);
    expect((await cli("vote", "cast", H, "team", "lunch")).code).toBe(2);
    expect((await cli("group", "task", H, "team", "--type", "x", "--payload", "[1]")).code).toBe(2);
  });
});
