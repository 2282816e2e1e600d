// A group host keeps its groups in its store (SQLite here): killed with
// SIGKILL in the middle of a group task and of a vote, and started again on
// the same data dir and port, it finishes the group task from the members'
// events (the sub-tasks ran on at the members), closes the vote whose
// deadline passed while it was down, and a watcher resumes its stream
// without losing or repeating an event.
import { afterAll, beforeAll, expect, it } from "vitest";
import { GroupEventKind, GroupTaskState, GroupTaskStrategy, VoteCloseReason, VoteOutcome } from "../gen/synapse/v1/a2n_pb.js";
import { VoteState } from "../gen/synapse/v1/group_pb.js";
import { GroupClient } from "../src/client/group-client.js";
import { startServe, type ServeProcess } from "./helpers/cli.js";
import { inviteAll, startGroupAgents, stopAll, userClient, type GroupAgent } from "./helpers/group-agents.js";
import { tempDir } from "./helpers/server.js";

let members: GroupAgent[];
let host: ServeProcess;
let hostDir: string;

beforeAll(async () => {
  hostDir = await tempDir("synapse-group-host-");
  [host, members] = await Promise.all([startServe(["--data-dir", hostDir], { SYNAPSE_LOG_LEVEL: "warn" }), startGroupAgents(2)]);
}, 30_000);
afterAll(async () => {
  await host.stop();
  await stopAll(members);
});

it("resumes group tasks, vote deadlines and watches after a kill -9", async () => {
  // Patient enough to wait for the host to come back.
  const lead = await GroupClient.connect({ baseUrl: host.url, identity: (await userClient(host.url)).identity, maxRetries: 10, retryBaseDelayMs: 200 });
  await lead.create("durable");
  // The members join through the host that will be killed.
  const asHost = await Promise.all(members.map(async (member) => ({ ...member, client: await GroupClient.connect({ baseUrl: host.url, identity: member.identity }) })));
  await inviteAll(lead, "durable", asHost);

  const watched: number[] = [];
  const watching = (async () => {
    for await (const item of lead.watch("durable", { fromSequence: 1 })) {
      if (item.kind === "event") watched.push(item.event.sequence);
      if (item.kind === "event" && item.event.payload.kind === GroupEventKind.GROUP_TASK_FINISHED) return;
    }
  })();

  const shards = [1, 2, 3, 4].map((n) => ({ csv: `n\n${n}\n${n + 1}`, delay_ms_per_row: 1500 }));
  await lead.submitTask("durable", { groupTaskId: "long", taskType: "data_analysis", shards, strategy: GroupTaskStrategy.SHARD });
  await lead.startVote("durable", { voteId: "brief", question: "?", options: ["yes", "no"], rule: 1, quorum: 1, deadline: new Date(Date.now() + 1500) });
  await asHost[0]!.client.cast("durable", "brief", { choice: "yes" });
  await new Promise((resolve) => setTimeout(resolve, 500));
  const before = await lead.getGroupTask("durable", "long");
  expect(before.state).toBe(GroupTaskState.RUNNING); // killed mid-task (a loaded machine may have finished a shard or two)
  expect(before.outputs.length).toBeLessThan(4);

  const port = new URL(host.url).port;
  await host.stop("SIGKILL");
  await new Promise((resolve) => setTimeout(resolve, 1500)); // the vote's deadline passes while the host is down
  host = await startServe(["--data-dir", hostDir, "--port", port], { SYNAPSE_LOG_LEVEL: "warn", PORT: port });
  expect(host.url.endsWith(`:${port}`)).toBe(true);

  await watching;
  const task = await lead.getGroupTask("durable", "long");
  expect(task.state).toBe(GroupTaskState.COMPLETED);
  expect(task.outputs.map((output) => output.slot)).toEqual([0, 1, 2, 3]);
  // Each shard ran once at its member: resent after the restart, a sub-task is the same task (same id and idempotency key).
  expect(task.subtasks).toHaveLength(4);
  const vote = await lead.getVote("durable", "brief");
  expect(vote.state).toBe(VoteState.CLOSED);
  expect(vote.tally).toMatchObject({ closedReason: VoteCloseReason.DEADLINE, outcome: VoteOutcome.DECIDED, winner: "yes" });
  // The watcher reconnected and saw every event once, in order.
  expect(watched).toEqual(watched.map((_, index) => index + 1));
}, 60_000);
