// The console's Groups view in Chromium, against a real agent on 127.0.0.1
// that hosts groups (serveAgent({ groups: true })). The page imports a key
// that a coordinator invited into a group (its consent is signed with that
// key by a GroupClient, the page only reads), then shows the group's
// members with roles and weights, a vote counted live as ballots arrive
// until it closes with its winner, a group task run at a member with its
// sub-task and output, and the group's signed log verified in the browser,
// resumed from the next sequence after the stream drops. Screenshots go to test-artifacts/console/.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createIdentity, type AgentIdentity } from "../../src/api/index.js";
import { GroupClient } from "../../src/api/client.js";
import { ConsensusRule, GroupTaskState, GroupTaskStrategy, WatchGroupRequestSchema, WatchGroupResponseSchema, type WatchGroupResponse } from "../../src/api/proto.js";
import { serveAgent, type ServedAgent, type TaskTypeHandler } from "../../src/api/server.js";
import { keyToPem } from "../../src/crypto/keys.js";
import { launchChromium, openConsole, screenshot, waitReady, type ConsolePage } from "./harness.js";

const TIMEOUT = 20_000;
const GROUP = "reviewers";

describe("the console in Chromium, groups and votes", () => {
  let host: ServedAgent;
  let worker: ServedAgent;
  let me: AgentIdentity;
  let coordinator: GroupClient;
  let asMe: GroupClient;
  let asWorker: GroupClient;
  let browser: Browser;
  let session: ConsolePage;
  let page: Page;

  beforeAll(async () => {
    const echo: TaskTypeHandler = { executeTask: async (task) => ({ output: { echoed: task.payload.text ?? null } }) };
    host = await serveAgent({ handlers: { echo }, store: "memory", groups: true, host: "127.0.0.1" });
    worker = await serveAgent({ handlers: { echo }, store: "memory", host: "127.0.0.1" });
    me = createIdentity();
    coordinator = await GroupClient.connect({ baseUrl: host.url, identity: createIdentity() });
    asMe = await GroupClient.connect({ baseUrl: host.url, identity: me });
    asWorker = await GroupClient.connect({ baseUrl: host.url, identity: worker.agent.identity });
    await coordinator.create(GROUP, { name: "Reviewers", description: "reads and votes" });
    // The console's identity is a member of weight 2 without an endpoint: it votes, it runs no sub-tasks.
    const mine = await coordinator.invite(GROUP, { agentId: me.agentId, keyId: me.key.keyId }, { weight: 2 });
    await asMe.join(GROUP, { invitationId: mine.reply.header.replyTo });
    const theirs = await coordinator.invite(GROUP, { agentId: worker.agent.agentId, keyId: worker.agent.identity.key.keyId });
    await asWorker.join(GROUP, { invitationId: theirs.reply.header.replyTo, endpointUrl: worker.url });

    browser = await launchChromium();
    session = await openConsole(browser, host.url);
    page = session.page;
    await page.locator('nav a[data-route="identity"]').click();
    await page.getByTestId("import-key").fill(keyToPem(me.key));
    await Promise.all([page.waitForEvent("load"), page.getByTestId("import-submit").click()]);
    await waitReady(page);
    expect(await page.getByTestId("whoami").textContent()).toBe(me.agentId);
  });
  afterAll(async () => {
    await browser?.close();
    await worker?.close();
    await host?.close();
  });

  const detail = () => page.getByTestId("group-detail");

  it("lists the group and opens it from the keyboard, with its members, roles and weights", async () => {
    await page.getByTestId("nav-groups").click();
    const row = page.locator(`[data-testid="group-row"][data-group-id="${GROUP}"]`);
    await row.waitFor({ timeout: TIMEOUT });
    expect(await row.textContent()).toContain("Reviewers");
    expect(await row.getAttribute("data-status")).toBe("active");
    await row.locator("a").focus();
    await page.keyboard.press("Enter");
    await detail().getByTestId("group-members").waitFor({ timeout: TIMEOUT });
    // Focus follows to the group's heading, as it does for a task.
    await page.locator("#group-title:focus").waitFor({ timeout: TIMEOUT });
    expect(await page.evaluate("document.activeElement?.id")).toBe("group-title");
    expect(await row.getAttribute("aria-current")).toBe("true");
    const members = detail().getByTestId("group-member");
    await expect.poll(() => members.count(), { timeout: TIMEOUT }).toBe(3);
    const roles = await members.evaluateAll((all) => all.map((tr) => `${tr.getAttribute("data-role")}:${tr.getAttribute("data-weight")}`));
    expect(roles).toEqual(["coordinator:1", "member:2", "member:1"]);
    expect(await detail().locator(`[data-testid="group-member"][data-agent-id="${me.agentId}"]`).textContent()).toContain("(you)");
    expect(await detail().getByTestId("group-name").textContent()).toBe("Reviewers");
  });

  it("follows a vote live: the interim count as ballots arrive, then the final count and its winner", async () => {
    const { vote } = await coordinator.startVote(GROUP, { voteId: "ship", question: "Ship the release?", options: ["yes", "no"], rule: ConsensusRule.MAJORITY, deadline: new Date(Date.now() + 10 * 60_000) });
    expect(vote?.eligible.length).toBe(3);
    const panel = detail().locator('[data-testid="vote"][data-vote-id="ship"]');
    await panel.waitFor({ timeout: TIMEOUT });
    expect(await panel.getAttribute("data-state")).toBe("open");
    expect(await panel.getByTestId("vote-question").textContent()).toBe("Ship the release?");
    expect(await panel.getByTestId("deadline-countdown").textContent()).toMatch(/^(9|10):\d\d left$/);

    await coordinator.cast(GROUP, "ship", { choice: "yes" });
    // The panel is redrawn on every change: a locator finds the current one.
    await expect.poll(() => panel.locator('[data-testid="vote-count"][data-option="yes"] td.num').textContent(), { timeout: TIMEOUT }).toBe("1");
    expect(await panel.getAttribute("data-final")).toBe("false");
    await asMe.cast(GROUP, "ship", { choice: "no" });
    await asWorker.cast(GROUP, "ship", { choice: "yes" }); // the last eligible ballot closes it
    const closed = detail().locator('[data-testid="vote"][data-vote-id="ship"][data-state="closed"]');
    await closed.waitFor({ timeout: TIMEOUT });
    expect(await closed.getAttribute("data-outcome")).toBe("decided");
    expect(await closed.getAttribute("data-final")).toBe("true");
    expect(await closed.getByTestId("vote-winner").textContent()).toBe("yes");
    expect(await closed.getByTestId("vote-outcome").textContent()).toContain("decided: yes");
    expect(await closed.getByTestId("vote-outcome").textContent()).toContain("3 of 3 voted");
    expect(await closed.locator('[data-testid="vote-count"][data-option="yes"] td.num').textContent()).toBe("2");
    expect(await closed.locator('[data-testid="vote-count"][data-option="no"] td.num').textContent()).toBe("1");
    await screenshot(page, "12-group-vote");
  });

  it("shows a group task's state, its sub-task at the member and the output", async () => {
    const { groupTask } = await coordinator.submitTask(GROUP, { groupTaskId: "echo-all", taskType: "echo", payload: { text: "hello group" }, strategy: GroupTaskStrategy.BROADCAST }, 10_000);
    expect(groupTask?.state).toBe(GroupTaskState.COMPLETED);
    const panel = detail().locator('[data-testid="group-task"][data-group-task-id="echo-all"]');
    await panel.locator('[data-testid="group-task-state"][data-state="completed"]').waitFor({ timeout: TIMEOUT });
    expect(await panel.textContent()).toContain("broadcast");
    expect(await panel.textContent()).toContain("1 of 1 done");
    const subtask = panel.locator(`[data-testid="subtask"][data-agent-id="${worker.agent.agentId}"]`);
    expect(await subtask.locator("[data-state]").getAttribute("data-state")).toBe("completed");
    expect(await panel.locator(`[data-testid="member-output"][data-agent-id="${worker.agent.agentId}"]`).textContent()).toContain('{"echoed":"hello group"}');
  });

  it("lists the group's signed log, every event verified in the browser", async () => {
    const verdict = detail().getByTestId("group-log-verdict");
    const { group } = await coordinator.getGroup(GROUP);
    const last = Number(group!.lastSequence);
    await expect.poll(() => detail().getByTestId("event").count(), { timeout: TIMEOUT }).toBe(last);
    expect(await verdict.getAttribute("data-all-verified")).toBe("true");
    const sequences = await detail().getByTestId("event").evaluateAll((rows) => rows.map((row) => Number(row.getAttribute("data-sequence"))));
    expect(sequences).toEqual(Array.from({ length: last }, (_, i) => i + 1));
    expect(await detail().locator('[data-testid="event"][data-sequence="1"]').textContent()).toContain("group created");
    expect(await detail().locator('[data-testid="event"] [data-testid="event-verification"].bad').count()).toBe(0);
    expect(await detail().getByTestId("event").filter({ hasText: "vote tallied" }).count()).toBe(1);
    // The list counts the events as they arrive.
    await expect.poll(() => page.locator(`[data-testid="group-row"][data-group-id="${GROUP}"] [data-testid="group-events"]`).textContent(), { timeout: TIMEOUT }).toBe(String(last));
    await screenshot(page, "13-group-log");
  });

  it("resumes a dropped stream from the next sequence: nothing missed, nothing repeated", async () => {
    // The first stream the page opens carries the snapshot and events 1 to 4, then ends without
    // trailers (a connection lost); the page must open the next one from event 5.
    const { group } = await coordinator.getGroup(GROUP);
    const events = [];
    for await (const item of coordinator.watch(GROUP)) {
      if (item.kind === "event") events.push(item.event);
      if (events.length === 4) break;
    }
    const frame = (message: WatchGroupResponse) => {
      const bytes = toBinary(WatchGroupResponseSchema, message);
      const header = Buffer.alloc(5);
      header.writeUInt32BE(bytes.length, 1);
      return Buffer.concat([header, bytes]);
    };
    const cut = Buffer.concat([
      frame(create(WatchGroupResponseSchema, { kind: { case: "snapshot", value: group! } })),
      ...events.map((event) => frame(create(WatchGroupResponseSchema, { kind: { case: "event", value: { sequence: BigInt(event.sequence), message: { envelope: event.envelope } } } }))),
    ]);
    const from: bigint[] = [];
    await page.route("**/synapse.v1.GroupService/WatchGroup", async (route) => {
      const body = route.request().postDataBuffer();
      from.push(body ? fromBinary(WatchGroupRequestSchema, body.subarray(5)).fromSequence : -1n);
      if (from.length > 1) return route.continue();
      await route.fulfill({ status: 200, headers: { "content-type": "application/grpc-web+proto" }, body: cut });
    });
    await page.goto(`${host.url}/console#/tasks`);
    await waitReady(page);
    await page.goto(`${host.url}/console#/groups/${GROUP}`);
    const last = Number((await coordinator.getGroup(GROUP)).group!.lastSequence);
    await expect.poll(() => detail().getByTestId("event").count(), { timeout: TIMEOUT }).toBe(last);
    expect(from.slice(0, 2)).toEqual([1n, 5n]);
    const sequences = await detail().getByTestId("event").evaluateAll((rows) => rows.map((row) => Number(row.getAttribute("data-sequence"))));
    expect(sequences).toEqual(Array.from({ length: last }, (_, i) => i + 1));
    expect(await detail().getByTestId("group-log-verdict").getAttribute("data-all-verified")).toBe("true");
    await expect.poll(() => detail().getByTestId("group-stream-status").textContent(), { timeout: TIMEOUT }).toBe("following the group live");
    await page.unroute("**/synapse.v1.GroupService/WatchGroup");
  });

  it("answers a group it does not know as missing, and a member's role in the list", async () => {
    await page.goto(`${host.url}/console#/groups/nobody-here`);
    await page.getByTestId("group-missing").waitFor({ timeout: TIMEOUT });
    const row = page.locator(`[data-testid="group-row"][data-group-id="${GROUP}"]`);
    await row.waitFor({ timeout: TIMEOUT });
    expect(await row.locator("td").nth(2).textContent()).toBe("member");
  });

  it("logged no errors in the browser", () => {
    expect(session.errors).toEqual([]);
  });
});
